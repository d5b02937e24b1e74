"""A ResNet-shaped body at a symbolic batch: the RGB stem conv reads its NCHW input directly (3
channels would waste most of a block), max pool, a basic block with its residual Add and Relus,
a global average pool, then Flatten and Gemm. Everything from the stem to the pool runs in the
blocked layout (pools with a window of 1 on the lane dim, the global pool as an AveragePool
over H x W); one Reorder takes the pooled [N, 16, 1, 1] back to NCHW. Expects an AVX-512
target (blocks of 16)."""
from case_util import model, node, tensor, weights

PASSES = "layout"


def build():
    nodes = [
        node("Conv", ["x", "ws", "bs"], ["s"], kernel_shape=[7, 7], strides=[2, 2],
             pads=[3, 3, 3, 3]),
        node("Relu", ["s"], ["sr"]),
        node("MaxPool", ["sr"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        node("Conv", ["p", "wa", "ba"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Relu", ["a"], ["ar"]),
        node("Conv", ["ar", "wb", "bb"], ["b"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Add", ["b", "p"], ["sum"]),
        node("Relu", ["sum"], ["blk"]),
        node("GlobalAveragePool", ["blk"], ["gap"]),
        node("Flatten", ["gap"], ["f"]),
        node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1),
    ]
    inits = [weights("ws", [16, 3, 7, 7], 1), weights("bs", [16], 2),
             weights("wa", [16, 16, 3, 3], 3), weights("ba", [16], 4),
             weights("wb", [16, 16, 3, 3], 5), weights("bb", [16], 6),
             weights("fc", [10, 16], 7), weights("fcb", [10], 8)]
    return model(nodes, [tensor("x", ["N", 3, 32, 32])], [tensor("y", ["N", 10])], inits)
