/* conv.h -- what the convolution templates (conv2d_nchwc.c, conv2d_nchw.c, conv2d_winograd.c,
 * and the CUDA conv2d_cuda.c) share: a conv node
 * read into plain numbers (shapes, strides, pads, groups, epilogue), the workload key, the
 * placeholders of a conv kernel's arguments, and the declarations of the templates themselves
 * for the registry (templates.c). */
#ifndef WPK_KERNELS_CONV_H
#define WPK_KERNELS_CONV_H

#include "te/algo/conv2d_nchwc.h"
#include "kernels/provider.h"

/* One 2-D conv node: Conv, wpk::FusedConv, or wpk::ConvNCHWc (the layout pass's blocked conv). */
typedef struct tune_conv {
    ir_op op;
    int64_t n, cin, h, w;    /* X; cin: channels as X holds them (blocked: blocks x lanes) */
    int64_t cout, cg;        /* real output channels; input channels per group */
    int64_t kh, kw, oh, ow;
    int64_t bi, bo;          /* ConvNCHWc: lanes of X's blocks (1: X is NCHW) and of the output;
                                0 for NCHW nodes (the template chooses) */
    te_conv2d_params p;      /* explicit pads (auto_pad resolved) */
    bool depthwise;          /* one input and one output channel per group */
    bool wconst;             /* W's data is known (weights can be pre-packed) */
    bool bias, residual;     /* B and Z present */
    te_act act;
} tune_conv;

/* Read node n with its tensors (static float32 shapes). False when it is not a 2-D conv the
 * templates know, or shapes are not static; never reports an error (supports() asks). */
bool tune_conv_read(const ir_node *n, ir_tensor *const *in, ir_tensor *const *out, tune_conv *g);
/* The same for a task (task->in/out hold the shapes). */
bool tune_conv_read_task(const tune_task *t, tune_conv *g);

/* "<tmpl>:n1,c64,h56,w56,k64,r3,s3,st1,1,pd1,1,1,1,dl1,1,g1[,x16>16],ep=bias+res+relu" and the
 * FLOPs (2 per multiply-add; epilogues not counted). */
void tune_conv_describe(const char *tmpl, const tune_conv *g, tune_task *t);

/* The provider entry points of the templates that take Conv / FusedConv but not the blocked
 * ConvNCHWc (conv2d_nchw, conv2d_cuda): supports, and describe with the key prefixed by
 * self->name. */
bool tune_conv_supports_nchw(const kernel_provider *self, const ir_node *n, ir_tensor *const *in,
                             ir_tensor *const *out);
void tune_conv_describe_task(const kernel_provider *self, tune_task *t);
/* A zeroed cfg and the task's conv in g, for a default_config; false when the task is not a
 * conv (cfg stays zeroed). */
bool tune_conv_default_start(const tune_task *t, tune_config *cfg, tune_conv *g);

/* Placeholders of the node's present inputs, in order (omitted optional inputs take no
 * argument slot): X (x_shape), W (w_shape, marked constant when its data is known), B, Z
 * (z_shape). args[0..*nargs), and the epilogue reading B and Z. NULL entries only when out of
 * memory (reported on c). */
/* The start of an NCHW conv template's build: t read into *g (WPK_ERR_INVALID_ARG naming the
 * node when it is not a plain conv: a blocked ConvNCHWc is another template's) and cfg checked
 * against t's own space (tune_check_legal). */
wpk_status tune_conv_build_nchw(te_ctx *c, const kernel_provider *self, const tune_task *t,
                                const tune_space *s, const tune_config *cfg, tune_conv *g);
/* The reduction axis called name ("rc", "kh", "kw") of a conv's reduction t, or NULL. */
te_iter *tune_conv_raxis(const te_tensor *t, const char *name);

wpk_status tune_conv_args(te_ctx *c, const tune_task *t, const tune_conv *g,
                          const int64_t *x_shape, int x_ndim, const int64_t *w_shape, int w_ndim,
                          const int64_t *z_shape, int z_ndim, tune_build *out, te_epilogue *ep);

/* The knob values of knob `name` in cfg (must exist: the template made the space). */
int64_t tune_value(const tune_space *s, const tune_config *cfg, const char *name);

/* Lanes of the widest float vector the code generator uses on this machine (16, 8 or 4). */
int tune_vector_floats(void);

extern const kernel_provider tune_conv2d_nchwc;
extern const kernel_provider tune_conv2d_nchw;
/* Winograd F(2x2,3x3) / F(4x4,3x3): an alternative for 3x3 stride-1 convs (conv2d_winograd.c) */
extern const kernel_provider tune_conv2d_winograd;

#endif
