"""Two convs concatenated along channels (each a whole number of blocks), a per-channel scale
and shift (a lone BatchNormalization's Mul and Add, constants repacked to [1, C/x, 1, 1, x]),
a 1x1 conv; one conv's output is also read outside the region (Flatten to a second output), so
it gets an NCHW copy under its old name while the region reads the blocked one. Expects an
AVX-512 target (blocks of 16)."""
from case_util import model, node, tensor, weights

PASSES = "layout"


def build():
    nodes = [
        node("Conv", ["x", "wa"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Conv", ["x", "wb"], ["b"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Concat", ["a", "b"], ["cat"], axis=-3),
        node("Mul", ["cat", "scale"], ["m"]),
        node("Add", ["shift", "m"], ["sh"]),
        node("Conv", ["sh", "wc"], ["y"], kernel_shape=[1, 1]),
        node("Flatten", ["a"], ["fa"]),
    ]
    inits = [weights("wa", [16, 16, 3, 3], 1), weights("wb", [32, 16, 3, 3], 2),
             weights("scale", [48, 1, 1], 3), weights("shift", [1, 48, 1, 1], 4),
             weights("wc", [16, 48, 1, 1], 5)]
    return model(nodes, [tensor("x", [1, 16, 8, 8])],
                 [tensor("y", [1, 16, 8, 8]), tensor("fa", [1, 1024])], inits)
