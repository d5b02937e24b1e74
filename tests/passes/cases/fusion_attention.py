"""Attention fuses into wpk::Attention in the forms exporters emit: BERT's (Q, K, V split
into heads by Reshape + Transpose, K^T by Transpose 0,2,3,1, scores divided by sqrt(d), a mask
added, heads merged by Transpose 0,2,1,3), whose transposes become the op's perms; and
nn.MultiheadAttention's 3-D one ([heads, seq, d] operands, Q multiplied by the scale before
the MatMul, no mask); and Swin's shifted windows (a bias added, then a window mask added in a
[batch, windows, ...] view between two Reshapes), whose two constant masks become one.
And a fused QKV projection split by Slices (nn.MultiheadAttention's in_proj): the Slices and
head-split Reshapes become strided views (q_view, k_view, v_view) of the projection's output,
except V's, sliced with step 2, which keeps its Slice.
Declined: a Softmax over another axis, and scores read by a second node."""
from case_util import model, node, tensor, weights, const

PASSES = "fuse-attention,dce"
N, S, H, D = 2, 5, 3, 4


def bert_block(i, sm_axis=-1, extra_reader=False):
    q, k, v = f"q{i}", f"k{i}", f"v{i}"
    nodes = [node("Reshape", ["xq", "heads"], [q + "r"]),
             node("Reshape", ["xk", "heads"], [k + "r"]),
             node("Reshape", ["xv", "heads"], [v + "r"]),
             node("Transpose", [q + "r"], [q], perm=[0, 2, 1, 3]),
             node("Transpose", [k + "r"], [k], perm=[0, 2, 3, 1]),
             node("Transpose", [v + "r"], [v], perm=[0, 2, 1, 3]),
             node("MatMul", [q, k], [f"s{i}"]), node("Div", [f"s{i}", "sqrt_d"], [f"sd{i}"]),
             node("Add", [f"sd{i}", "mask"], [f"sm{i}"]),
             node("Softmax", [f"sm{i}"], [f"p{i}"], axis=sm_axis),
             node("MatMul", [f"p{i}", v], [f"c{i}"]),
             node("Transpose", [f"c{i}"], [f"ct{i}"], perm=[0, 2, 1, 3]),
             node("Reshape", [f"ct{i}", "merged"], [f"y{i}"])]
    if extra_reader:
        nodes.append(node("Neg", [f"sd{i}"], [f"z{i}"]))
    return nodes


def build():
    nodes = bert_block(0) + bert_block(1, sm_axis=2) + bert_block(2, extra_reader=True)
    # nn.MultiheadAttention: [S, N*H, D] -> [N*H, S, D], Q scaled, K^T by Transpose 0,2,1
    nodes += [node("Reshape", ["xq", "mha_heads"], ["mq_r"]),
              node("Reshape", ["xk", "mha_heads"], ["mk_r"]),
              node("Reshape", ["xv", "mha_heads"], ["mv_r"]),
              node("Transpose", ["mq_r"], ["mq"], perm=[1, 0, 2]),
              node("Transpose", ["mk_r"], ["mk"], perm=[1, 0, 2]),
              node("Transpose", ["mv_r"], ["mv"], perm=[1, 0, 2]),
              node("Mul", ["mq", "rsqrt_d"], ["mqs"]),
              node("Transpose", ["mk"], ["mkt"], perm=[0, 2, 1]),
              node("MatMul", ["mqs", "mkt"], ["ms"]), node("Softmax", ["ms"], ["mp"], axis=-1),
              node("MatMul", ["mp", "mv"], ["mc"]),
              node("Transpose", ["mc"], ["y3"], perm=[1, 0, 2])]
    # Swin: [B*W, H, S, D] operands, B = 2 images of W = 2 windows
    nodes += [node("Mul", ["wq", "rsqrt_d"], ["wqs"]),
              node("Transpose", ["wk"], ["wkt"], perm=[0, 1, 3, 2]),
              node("MatMul", ["wqs", "wkt"], ["ws"]), node("Add", ["ws", "bias"], ["wsb"]),
              node("Reshape", ["wsb", "windowed"], ["w5"]),
              node("Add", ["w5", "window_mask"], ["w5m"]),
              node("Reshape", ["w5m", "unwindowed"], ["w4"]),
              node("Softmax", ["w4"], ["wp"], axis=-1), node("MatMul", ["wp", "wv"], ["y4"])]
    # one [N, S, 3*H*D] projection sliced into Q, K, V along its last axis
    hd = H * D
    nodes += [node("Slice", ["xqkv", "q_start", "q_end", "last_axis"], ["fq"]),
              node("Slice", ["xqkv", "q_end", "k_end", "last_axis"], ["fk"]),
              node("Slice", ["xqkv2", "zero", "v_end", "last_axis", "two"], ["fv"]),
              node("Reshape", ["fq", "heads"], ["fq_r"]),
              node("Reshape", ["fk", "heads"], ["fk_r"]),
              node("Reshape", ["fv", "heads"], ["fv_r"]),
              node("Transpose", ["fq_r"], ["fq_t"], perm=[0, 2, 1, 3]),
              node("Transpose", ["fk_r"], ["fk_t"], perm=[0, 2, 3, 1]),
              node("Transpose", ["fv_r"], ["fv_t"], perm=[0, 2, 1, 3]),
              node("Mul", ["fq_t", "rsqrt_d"], ["fqs"]),
              node("MatMul", ["fqs", "fk_t"], ["fs"]), node("Softmax", ["fs"], ["fp"], axis=-1),
              node("MatMul", ["fp", "fv_t"], ["fc"]),
              node("Transpose", ["fc"], ["y5"], perm=[0, 2, 1, 3])]
    inits = [const("q_start", [0]), const("q_end", [hd]), const("k_end", [2 * hd]),
             const("zero", [0]), const("v_end", [2 * hd]), const("two", [2]),
             const("last_axis", [-1]),
             const("heads", [N, S, H, D]), const("merged", [N, S, H * D]),
             const("mha_heads", [S, N * H, D]),
             const("sqrt_d", D ** 0.5, "float32"), const("rsqrt_d", D ** -0.5, "float32"),
             weights("mask", [N, 1, 1, S], 7), weights("bias", [1, H, S, S], 8),
             weights("window_mask", [1, 2, 1, S, S], 9), const("windowed", [2, 2, H, S, S]),
             const("unwindowed", [4, H, S, S])]
    inputs = [tensor(n, [N, S, H * D]) for n in ("xq", "xk", "xv")]
    inputs += [tensor(n, [4, H, S, D]) for n in ("wq", "wk", "wv")]
    inputs += [tensor("xqkv", [N, S, 3 * H * D]), tensor("xqkv2", [N, S, 4 * H * D])]
    outputs = [tensor(f"y{i}", [N, S, H * D]) for i in range(3)]
    outputs += [tensor("y3", [S, N * H, D]), tensor("z2", [N, H, S, S]), tensor("y4", [4, H, S, D]),
                tensor("y5", [N, S, H, D])]
    return model(nodes, inputs, outputs, inits, opset=14)
