/* kernel.c -- one task's kernel from its template to C source, and the `wpk lower` text (see
 * kernel.h). */
#include "kernels/cpu_kernel.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "loop/lower.h"

static int64_t numel(const te_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

static int64_t elem_bytes(te_scalar s) { return s == TE_I64 ? 8 : s == TE_BOOL ? 1 : 4; }

/* The value text of knob `name` in "knob=value,..." (NULL: not named). */
static const char *named(const char *list, const char *name) {
    size_t len = strlen(name);
    const char *given = NULL;
    for (const char *p = list; p && *p;) {
        if (!strncmp(p, name, len) && p[len] == '=') given = p + len + 1;
        p = strchr(p, ',');
        if (p) p++;
    }
    return given;
}

wpk_status cpu_config_resolve(wpk_context *ctx, const tune_task *task, const tune_space *s,
                              const char *config, tune_config *out) {
    task->tmpl->default_config(task->tmpl, task, s, out);
    if (!config || !*config) return WPK_OK;
    /* the default's text with the given knobs replaced, parsed as a whole: tune_config_parse
       names a knob or value that does not fit. A knob the template added after the config was
       stored keeps the value it was measured with. */
    strbuf text = {0};
    for (int k = 0; k < s->nknobs; k++) {
        const char *name = s->knobs[k].name;
        const char *given = named(config, name);
        if (!given) given = named(task->tmpl->unnamed, name);
        sb_printf(&text, "%s%s=", k ? "," : "", name);
        if (given) {
            const char *end = strchr(given, ',');
            sb_printf(&text, "%.*s", (int)(end ? (size_t)(end - given) : strlen(given)), given);
        } else {
            sb_printf(&text, "%lld", (long long)s->knobs[k].values[out->choice[k]]);
        }
    }
    /* a knob the template does not have is an error too */
    for (const char *p = config; p && *p;) {
        const char *eq = strchr(p, '='), *end = strchr(p, ',');
        if (!eq || (end && eq > end)) {
            sb_free(&text);
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "config '%s': expected knob=value",
                             config);
        }
        bool known = false;
        for (int k = 0; k < s->nknobs && !known; k++)
            known = strlen(s->knobs[k].name) == (size_t)(eq - p) &&
                    !strncmp(s->knobs[k].name, p, (size_t)(eq - p));
        if (!known) {
            sb_free(&text);
            return wpk_error(ctx, WPK_ERR_INVALID_ARG, "config '%s': template %s has no knob "
                             "'%.*s'", config, task->tmpl->name, (int)(eq - p), p);
        }
        p = end ? end + 1 : NULL;
    }
    if (text.oom) {
        sb_free(&text);
        return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory reading a config");
    }
    wpk_status st = tune_config_parse(ctx, s, text.s ? text.s : "", out);
    sb_free(&text);
    return st;
}

static void log_loops(wpk_context *ctx, const tune_task *task, const char *config,
                      const loop_func *f) {
    strbuf b = {0};
    sb_printf(&b, "== lower %s (%s, node '%s', %s) ==\n", f->name, task->key, task->node->name,
              config);
    loop_print_func(f, &b);
    if (b.s) wpk_log(ctx, WPK_LOG_INFO, "%s", b.s);
    sb_free(&b);
}

/* Lower, hoist scratch and emit one function into k->source. */
static wpk_status add_func(te_ctx *c, cpu_kernel *k, loop_func *f, bool scratch,
                           const cg_c_options *o) {
    if (scratch) {
        int n = cpu_hoist_scratch(c, f, CPU_MAX_SCRATCH);
        if (n < 0) return wpk_error(c->err, WPK_ERR_NOMEM, "out of memory building a kernel");
        int64_t off = 0;
        for (int i = 0; i < n; i++) {
            const loop_buffer *b = f->args[f->nargs - n + i];
            k->scratch_off[i] = off;
            off += (b->size * elem_bytes(b->dtype) + 63) / 64 * 64;
        }
        k->nscratch = n;
        k->scratch_bytes = off;
    }
    wpk_status st = cg_c_emit(c->err, f, o, &k->source);
    if (st == WPK_OK) k->nfuncs++;
    return st;
}

typedef struct built {
    tune_space space;
    tune_config cfg;
    tune_build b;
    loop_func *f;
    loop_func *pack[TUNE_MAX_ARGS];
} built;

/* Template build + lowering of the kernel and its pack computes, in c. */
static wpk_status build_lower(te_ctx *c, const tune_task *task, const char *name,
                              const char *config, built *out) {
    memset(out, 0, sizeof *out);
    wpk_context *ctx = c->err;
    if (!task->tmpl->build)
        return wpk_error(ctx, WPK_ERR_INVALID_ARG, "%s is a library: it has no kernel to generate",
                         task->tmpl->name);
    task->tmpl->space(task->tmpl, task, &out->space);
    wpk_status st = cpu_config_resolve(ctx, task, &out->space, config, &out->cfg);
    if (st) return st;
    st = task->tmpl->build(task->tmpl, c, task, &out->space, &out->cfg, &out->b);
    if (st) return st;
    const tune_build *b = &out->b;
    if (b->ninputs < 0 || b->nargs <= b->ninputs || b->nargs > TUNE_MAX_ARGS * 2)
        return wpk_error(ctx, WPK_ERR_INTERNAL, "template %s built %d arguments with %d inputs",
                         task->tmpl->name, b->nargs, b->ninputs);
    if ((st = loop_lower(c, b->schedule, name, b->args, b->nargs, &out->f))) return st;
    for (int i = 0; i < b->ninputs && i < TUNE_MAX_ARGS; i++) {
        if (!b->prepack[i]) continue;
        if (!b->prepack_src[i] || !te_tensor_is_constant(b->prepack[i]))
            return wpk_error(ctx, WPK_ERR_INTERNAL, "template %s: the pre-pack of argument %d "
                             "does not read a constant", task->tmpl->name, i);
        char pname[48];
        snprintf(pname, sizeof pname, "%s_p%d", name, i);
        te_schedule *ps = te_schedule_create(c, &b->prepack[i], 1);
        if (!ps) return c->oom ? WPK_ERR_NOMEM : WPK_ERR_INVALID_ARG;
        /* the pack's outermost loop in parallel: it runs once, on weights of megabytes */
        te_stage *pst = te_stage_of(ps, b->prepack[i]);
        if (pst && b->prepack[i]->ndim > 0 && (st = te_parallel(pst, b->prepack[i]->axes[0])))
            return st;
        te_tensor *pargs[2] = {b->prepack_src[i], b->prepack[i]};
        if ((st = loop_lower(c, ps, pname, pargs, 2, &out->pack[i]))) return st;
    }
    return WPK_OK;
}

wpk_status cpu_kernel_lower(te_ctx *c, const tune_task *task, const char *config,
                            loop_func **out) {
    *out = NULL;
    built *bt = wpk_calloc(1, sizeof *bt);
    if (!bt) return wpk_error(c->err, WPK_ERR_NOMEM, "out of memory lowering a kernel");
    wpk_status st = build_lower(c, task, "kernel", config, bt);
    if (st == WPK_OK) *out = bt->f; /* in c's arena: outlives bt */
    wpk_free(bt);
    return st;
}

ir_tensor cpu_tensor_at_one_image(const ir_tensor *t, int64_t images) {
    ir_tensor one = *t;
    if (!t->data && t->ndim >= 1 && t->dims[0] == images) one.dims[0] = 1;
    return one;
}

/* task at one image: the leading dim of every tensor computed at run time whose leading dim
 * is `images` set to 1, into *one; the bytes of one image of each kernel argument (inputs
 * present, in order, then outputs; 0: the whole tensor every time) into image_bytes. Returns
 * the inputs present (where the outputs' entries start). */
static int at_one_image(const tune_task *task, int64_t images, tune_task *one,
                        int64_t image_bytes[CPU_MAX_KERNEL_ARGS]) {
    ir_tensor in[TUNE_MAX_ARGS], out[TUNE_MAX_ARGS];
    ir_tensor *pin[TUNE_MAX_ARGS] = {0}, *pout[TUNE_MAX_ARGS] = {0};
    int a = 0, nin_present = 0;
    for (int i = 0; i < task->nin + task->nout; i++) {
        const ir_tensor *t = i < task->nin ? &task->in[i] : &task->out[i - task->nin];
        ir_tensor *dst = i < task->nin ? &in[i] : &out[i - task->nin];
        if (t->dtype == WPK_DTYPE_UNDEFINED) continue; /* an omitted optional input */
        *dst = cpu_tensor_at_one_image(t, images);
        if (a < CPU_MAX_KERNEL_ARGS)
            image_bytes[a++] = dst->dims[0] != t->dims[0] ? (int64_t)ir_nbytes(dst) : 0;
        if (i < task->nin) pin[i] = dst, nin_present++;
        else pout[i - task->nin] = dst;
    }
    tune_task_init(one, task->tmpl, task->node, pin, pout);
    return nin_present;
}

/* The kernel's function k->name for all images: the one-image kernel `inner` once per image,
 * each per-image argument advanced by one image's bytes (inputs first, then outputs: the
 * order of at_one_image's image_bytes, which skips no kernel argument before the outputs
 * because a template drops only trailing inputs). */
static void add_image_loop(cpu_kernel *k, const char *inner, int64_t images,
                           const int64_t *image_bytes, int nin_present) {
    const int nargs = k->ninputs + k->noutputs + k->nscratch;
    strbuf *b = &k->source;
    sb_printf(b, "\n/* %lld images, one at a time: the kernel was chosen at batch 1, where its "
              "buffers fit the cache */\n"
              "void %s(void *const *args);\nvoid %s(void *const *args) {\n"
              "    void *a[%d];\n    for (int i = 0; i < %d; i++) a[i] = args[i];\n"
              "    for (int64_t n = 0; n < %lld; n++) {\n",
              (long long)images, k->name, k->name, nargs, nargs, (long long)images);
    for (int i = 0; i < k->ninputs + k->noutputs; i++) {
        /* the outputs' entries follow all present inputs' in image_bytes */
        int64_t bytes = image_bytes[i < k->ninputs ? i : nin_present + (i - k->ninputs)];
        if (bytes)
            sb_printf(b, "        a[%d] = (char *)args[%d] + n * %lldLL;\n", i, i,
                      (long long)bytes);
    }
    sb_printf(b, "        %s(a);\n    }\n}\n", inner);
    k->nfuncs++;
}

static wpk_status kernel_build(wpk_context *ctx, const tune_task *task, int index,
                               const char *config, int64_t images, const cpu_build_options *opt,
                               cpu_kernel *k) {
    memset(k, 0, sizeof *k);
    cpu_build_options def = {cg_c_default_options(), false};
    if (!opt) opt = &def;
    const bool dump = opt->dump;
    k->tmpl = task->tmpl;
    snprintf(k->name, sizeof k->name, "k%d", index);
    /* per image: the function the template builds is the one-image kernel */
    char fname[sizeof k->name + 8];
    snprintf(fname, sizeof fname, "%s%s", k->name, images > 1 ? "_image" : "");
    int64_t image_bytes[CPU_MAX_KERNEL_ARGS] = {0};
    int nin_present = 0;
    tune_task *one = NULL;
    if (images > 1) {
        one = wpk_malloc(sizeof *one);
        if (!one) return wpk_error(ctx, WPK_ERR_NOMEM, "out of memory building a kernel");
        nin_present = at_one_image(task, images, one, image_bytes);
        task = one;
    }
    te_ctx c;
    te_ctx_init(&c, ctx);
    built *bt = wpk_calloc(1, sizeof *bt);
    wpk_status st = bt ? build_lower(&c, task, fname, config, bt)
                       : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory building a kernel");
    if (st == WPK_OK) {
        strbuf cs = {0};
        tune_config_print(&bt->space, &bt->cfg, &cs);
        snprintf(k->config, sizeof k->config, "%s", cs.s ? cs.s : "");
        if (cs.oom) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory building a kernel");
        sb_free(&cs);
        k->ninputs = bt->b.ninputs;
        k->noutputs = bt->b.nargs - bt->b.ninputs;
        if (st == WPK_OK) st = add_func(&c, k, bt->f, true, &opt->cg);
        if (st == WPK_OK && images > 1) add_image_loop(k, fname, images, image_bytes, nin_present);
        if (st == WPK_OK && dump) log_loops(ctx, task, k->config, bt->f);
    }
    for (int i = 0; st == WPK_OK && i < TUNE_MAX_ARGS; i++) {
        if (!bt->pack[i]) continue;
        snprintf(k->pack_name[i], sizeof k->pack_name[i], "%s", bt->pack[i]->name);
        k->pack_numel[i] = numel(bt->b.prepack[i]);
        /* a pack kernel runs once at compile time: its buffers may stay its own */
        st = add_func(&c, k, bt->pack[i], false, &opt->cg);
        if (st == WPK_OK && dump) log_loops(ctx, task, k->config, bt->pack[i]);
    }
    if (st == WPK_OK && k->source.oom) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory");
    wpk_free(bt);
    wpk_free(one);
    te_ctx_free(&c);
    if (st) cpu_kernel_free(k);
    return st;
}

wpk_status cpu_kernel_build(wpk_context *ctx, const tune_task *task, int index, const char *config,
                            const cpu_build_options *opt, cpu_kernel *k) {
    return kernel_build(ctx, task, index, config, 0, opt, k);
}

wpk_status cpu_kernel_build_per_image(wpk_context *ctx, const tune_task *task, int index,
                                      const char *config, int64_t images,
                                      const cpu_build_options *opt, cpu_kernel *k) {
    return kernel_build(ctx, task, index, config, images, opt, k);
}

void cpu_kernel_free(cpu_kernel *k) {
    sb_free(&k->source);
    memset(k, 0, sizeof *k);
}

wpk_status cpu_kernel_print(wpk_context *ctx, const tune_task *task, const char *config,
                            strbuf *b) {
    te_ctx c;
    te_ctx_init(&c, ctx);
    built *bt = wpk_calloc(1, sizeof *bt);
    wpk_status st = bt ? build_lower(&c, task, "kernel", config, bt)
                       : wpk_error(ctx, WPK_ERR_NOMEM, "out of memory building a kernel");
    if (st == WPK_OK) {
        sb_printf(b, "task: %s\ntemplate: %s\nnode: %s\nconfig: ", task->key, task->tmpl->name,
                  task->node->name);
        tune_config_print(&bt->space, &bt->cfg, b);
        sb_puts(b, "\n\n== tensor expressions ==\n");
        te_tensor *outs[TUNE_MAX_ARGS * 2];
        int nout = 0;
        for (int i = bt->b.ninputs; i < bt->b.nargs; i++) outs[nout++] = bt->b.args[i];
        te_print_graph(outs, nout, b);
        for (int i = 0; i < TUNE_MAX_ARGS; i++)
            if (bt->b.prepack[i]) te_print_graph(&bt->b.prepack[i], 1, b);
        sb_puts(b, "\n== schedule ==\n");
        te_print_schedule(bt->b.schedule, b);
        sb_puts(b, "\n== loops ==\n");
        loop_print_func(bt->f, b);
        for (int i = 0; i < TUNE_MAX_ARGS; i++)
            if (bt->pack[i]) {
                sb_puts(b, "\n");
                loop_print_func(bt->pack[i], b);
            }
        if (b->oom) st = wpk_error(ctx, WPK_ERR_NOMEM, "out of memory printing a kernel");
    }
    wpk_free(bt);
    te_ctx_free(&c);
    return st;
}
