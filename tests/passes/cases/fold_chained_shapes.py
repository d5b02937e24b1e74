"""Shape chains that depend on one another, as in ShuffleNet's channel shuffle: the second Shape
reads the output of a Reshape whose shape is computed by the first chain, so it is known only
after that chain has folded and shapes are inferred again; both fold in one run of the pass."""
from case_util import const, model, node, tensor

PASSES = "fold-constants"


def build():
    nodes = [
        node("Shape", ["x"], ["s1"]),
        node("Gather", ["s1", "one"], ["c"], axis=0),
        node("Div", ["c", "two"], ["half"]),
        node("Unsqueeze", ["half", "axes0"], ["half1"]),
        node("Concat", ["batch_groups", "half1", "minus1"], ["shape1"], axis=0),
        node("Reshape", ["x", "shape1"], ["grouped"]),
        node("Transpose", ["grouped"], ["shuffled"], perm=[0, 2, 1, 3]),
        node("Shape", ["shuffled"], ["s2"]),
        node("Slice", ["s2", "start0", "end1"], ["b"]),
        node("Concat", ["b", "minus1"], ["shape2"], axis=0),
        node("Reshape", ["shuffled", "shape2"], ["y"]),
    ]
    inits = [const("one", 1), const("two", 2), const("axes0", [0]), const("batch_groups", [1, 2]),
             const("minus1", [-1]), const("start0", [0]), const("end1", [1])]
    return model(nodes, [tensor("x", [1, 6, 2, 2])], [tensor("y", [1, 24])], inits)
