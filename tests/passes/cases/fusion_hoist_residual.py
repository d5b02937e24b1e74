"""A residual Add after Reshapes of a GEMM's output (nn.MultiheadAttention's out_proj: a 2-D Gemm
reshaped to [S, N, E], then [N, S, E], then added to the input) moves in front of the
Reshapes, the residual reshaped to the Gemm's [S*N, E], and fuses into the Gemm as FusedGemm's
residual; the same after a MatMul. Declined: a Reshape chain whose middle value has a second
reader (the Add stays after the Reshapes), and an Add that broadcasts."""
from case_util import model, node, tensor, weights, const

PASSES = "hoist-residual,fuse-epilogue,dce"
S, N, E = 3, 2, 8


def build():
    nodes = [
        # Gemm [S*N, E] -> [S, N, E] -> [N, S, E] (+ z): hoisted, then fused
        node("Gemm", ["x", "w", "b"], ["g"], transB=1),
        node("Reshape", ["g", "sne"], ["g3"]),
        node("Reshape", ["g3", "nse"], ["g4"]),
        node("Add", ["g4", "z"], ["y0"]),
        # MatMul [S*N, E] -> [N, S, E], the residual first
        node("MatMul", ["x", "wm"], ["m"]),
        node("Reshape", ["m", "nse"], ["m3"]),
        node("Add", ["z", "m3"], ["y1"]),
        # the middle value read twice: declined
        node("MatMul", ["x", "wm"], ["d"]),
        node("Reshape", ["d", "sne"], ["d3"]),
        node("Reshape", ["d3", "nse"], ["d4"]),
        node("Add", ["d4", "z"], ["y2"]),
        node("Neg", ["d3"], ["y3"]),
        # a broadcasting Add (a bias row): declined
        node("MatMul", ["x", "wm"], ["e"]),
        node("Reshape", ["e", "nse"], ["e3"]),
        node("Add", ["e3", "row"], ["y4"]),
    ]
    inits = [weights("w", [E, E], 1), weights("b", [E], 2), weights("wm", [E, E], 3),
             weights("row", [1, 1, E], 4), const("sne", [S, N, E]), const("nse", [N, S, E])]
    inputs = [tensor("x", [S * N, E]), tensor("z", [N, S, E])]
    outputs = [tensor("y0", [N, S, E]), tensor("y1", [N, S, E]), tensor("y2", [N, S, E]),
               tensor("y3", [S, N, E]), tensor("y4", [N, S, E])]
    return model(nodes, inputs, outputs, inits, opset=14)
