"""A MobileNet/EfficientNet-shaped piece: depthwise 3x3 conv and ReLU6 (Clip), then
squeeze-excitation: global pool, a reduce conv with 4 output channels (fewer than a block: it
stays NCHW, after one small Reorder of the pooled values), an expand conv that reads the reduce
conv's NCHW output directly, Sigmoid, and the scale [N, 32, 1, 1] multiplied into the blocked
tensor by broadcasting; then a 1x1 projection and a Pad of H and W before an AveragePool, as
PyTorch exports AvgPool2d with padding. Expects an AVX-512 target (blocks of 16)."""
from case_util import const, model, node, tensor, weights

PASSES = "layout"


def build():
    nodes = [
        node("Conv", ["x", "wd"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=32),
        node("Clip", ["d", "zero", "six"], ["d6"]),
        node("GlobalAveragePool", ["d6"], ["gap"]),
        node("Conv", ["gap", "wr", "br"], ["red"], kernel_shape=[1, 1]),
        node("Relu", ["red"], ["redr"]),
        node("Conv", ["redr", "we", "be"], ["exp"], kernel_shape=[1, 1]),
        node("Sigmoid", ["exp"], ["s"]),
        node("Mul", ["d6", "s"], ["se"]),
        node("Conv", ["se", "wp"], ["proj"], kernel_shape=[1, 1]),
        node("Pad", ["proj", "pads"], ["padded"]),
        node("AveragePool", ["padded"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    inits = [weights("wd", [32, 1, 3, 3], 1), const("zero", 0.0, "float32"),
             const("six", 6.0, "float32"), weights("wr", [4, 32, 1, 1], 2),
             weights("br", [4], 3), weights("we", [32, 4, 1, 1], 4), weights("be", [32], 5),
             weights("wp", [48, 32, 1, 1], 6), const("pads", [0, 0, 1, 1, 0, 0, 1, 1])]
    return model(nodes, [tensor("x", ["N", 32, 12, 12])], [tensor("y", ["N", 48, 7, 7])], inits)
