/* mapper.c -- finding accumulations in a loop nest and mapping them onto instructions: strides
 * of each loop in each operand (affine index analysis), roles from the strides, and the
 * assignments of loops to the instruction's m, n and k that its description in the tensor IR
 * admits, with the layout changes each one needs. */
#include "isa/mapper.h"

#include <string.h>

#define MAX_LETS 32

/* The loops and lets around the statement being visited. */
typedef struct scope {
    const loop_stmt *fors[ISA_MAX_LOOPS];
    int nfors;
    const loop_stmt *lets[MAX_LETS];
    int nlets;
    bool too_deep;
} scope;

static const te_expr *let_value(const scope *sc, const te_iter *v) {
    for (int i = sc->nlets - 1; i >= 0; i--)
        if (sc->lets[i]->var == v) return sc->lets[i]->value;
    return NULL;
}

static bool depends(const scope *sc, const te_expr *e, const te_iter *v) {
    if (!e) return false;
    if (e->kind == TE_VAR) {
        if (e->var == v) return true;
        const te_expr *l = let_value(sc, e->var);
        return l && depends(sc, l, v);
    }
    if (e->kind == TE_LOAD) {
        for (int i = 0; i < e->nindex; i++)
            if (depends(sc, e->index[i], v)) return true;
        return false;
    }
    return depends(sc, e->a, v) || depends(sc, e->b, v) || depends(sc, e->c, v);
}

/* The coefficient of v in integer expression e; *ok false when e is not affine in v. */
static int64_t coef(const scope *sc, const te_expr *e, const te_iter *v, bool *ok) {
    int64_t k;
    switch (e->kind) {
    case TE_INT: return 0;
    case TE_VAR: {
        if (e->var == v) return 1;
        const te_expr *l = let_value(sc, e->var);
        return l ? coef(sc, l, v, ok) : 0;
    }
    case TE_ADD: return coef(sc, e->a, v, ok) + coef(sc, e->b, v, ok);
    case TE_SUB: return coef(sc, e->a, v, ok) - coef(sc, e->b, v, ok);
    case TE_MUL:
        if (te_is_const_int(e->a, &k)) return k * coef(sc, e->b, v, ok);
        if (te_is_const_int(e->b, &k)) return coef(sc, e->a, v, ok) * k;
        break;
    default: break;
    }
    if (depends(sc, e, v)) *ok = false;
    return 0;
}

/* value is C[index] + x * y (either order of the sum) with x, y scalar loads */
static bool accumulation(const loop_stmt *s, const te_expr **x, const te_expr **y) {
    const te_expr *v = s->value;
    if (v->type.lanes != 1 || v->kind != TE_ADD) return false;
    for (int order = 0; order < 2; order++) {
        const te_expr *acc = order ? v->b : v->a, *prod = order ? v->a : v->b;
        if (acc->kind != TE_BUF_LOAD || acc->buffer != s->buffer ||
            !te_expr_equal(acc->a, s->index) || prod->kind != TE_MUL ||
            prod->a->kind != TE_BUF_LOAD || prod->b->kind != TE_BUF_LOAD)
            continue;
        *x = prod->a;
        *y = prod->b;
        return true;
    }
    return false;
}

static isa_role role_of(const int64_t *stride) {
    int sig = (stride[0] != 0) | (stride[1] != 0) << 1 | (stride[2] != 0) << 2;
    switch (sig) {
    case 3: return ISA_ROLE_M;
    case 5: return ISA_ROLE_N;
    case 6: return ISA_ROLE_K;
    case 7: return ISA_ROLE_SHARED;
    default: return ISA_ROLE_OTHER;
    }
}

static bool make_nest(const scope *sc, const loop_stmt *s, isa_nest *out) {
    const te_expr *x, *y;
    if (sc->too_deep || !accumulation(s, &x, &y)) return false;
    memset(out, 0, sizeof *out);
    out->update = s;
    out->c = s->buffer, out->x = x->buffer, out->y = y->buffer;
    const te_expr *idx[3] = {s->index, x->a, y->a};
    for (int i = 0; i < sc->nfors; i++) {
        const loop_stmt *f = sc->fors[i];
        isa_loop *l = &out->loops[out->nloops++];
        l->var = f->var;
        int64_t min = 0;
        if (!te_is_const_int(f->extent, &l->extent) || !te_is_const_int(f->min, &min))
            return false;
        for (int o = 0; o < 3; o++) {
            bool ok = true;
            l->stride[o] = coef(sc, idx[o], f->var, &ok);
            if (!ok) return false;
        }
        l->role = role_of(l->stride);
    }
    /* an index must not depend on anything but these loops: a let of a non-affine value or a
     * variable bound outside would make the strides lie */
    for (int o = 0; o < 3; o++) {
        const te_expr *e = idx[o];
        for (int i = 0; i < sc->nlets; i++)
            if (depends(sc, e, sc->lets[i]->var)) {
                bool ok = true;
                for (int f = 0; f < sc->nfors; f++) coef(sc, e, sc->fors[f]->var, &ok);
                if (!ok) return false;
            }
    }
    return true;
}

static void walk(const loop_stmt *s, scope *sc, isa_nest *out, int max, int *n) {
    if (!s) return;
    switch (s->kind) {
    case LOOP_FOR:
        if (sc->nfors == ISA_MAX_LOOPS) {
            sc->too_deep = true;
            return;
        }
        sc->fors[sc->nfors++] = s;
        walk(s->body, sc, out, max, n);
        sc->nfors--;
        return;
    case LOOP_LET:
        if (sc->nlets == MAX_LETS) return;
        sc->lets[sc->nlets++] = s;
        walk(s->body, sc, out, max, n);
        sc->nlets--;
        return;
    case LOOP_IF:
        walk(s->body, sc, out, max, n);
        walk(s->else_body, sc, out, max, n);
        return;
    case LOOP_ALLOC: walk(s->body, sc, out, max, n); return;
    case LOOP_SEQ:
        for (int i = 0; i < s->nstmts; i++) walk(s->stmts[i], sc, out, max, n);
        return;
    case LOOP_STORE: {
        isa_nest nest;
        if (!make_nest(sc, s, &nest)) return;
        if (*n < max) out[*n] = nest;
        (*n)++;
        return;
    }
    case LOOP_BARRIER: return;
    }
}

void isa_find_nests(const loop_stmt *s, isa_nest *out, int max, int *n) {
    scope sc = {0};
    *n = 0;
    walk(s, &sc, out, max, n);
}

/* ---- matching against an instruction's description ---- */

static bool uses(const te_expr *e, const te_iter *v) {
    if (!e) return false;
    if (e->kind == TE_VAR) return e->var == v;
    if (e->kind == TE_LOAD) {
        for (int i = 0; i < e->nindex; i++)
            if (uses(e->index[i], v)) return true;
        return false;
    }
    return uses(e->a, v) || uses(e->b, v) || uses(e->c, v);
}

/* The role an axis of the description plays, found the way the nest's loops get theirs. */
static isa_role desc_role(const isa_desc *d, const te_iter *axis, bool in_c) {
    const te_expr *prod = d->c->body->a;
    int64_t st[3] = {in_c, uses(prod->a, axis), uses(prod->b, axis)};
    return role_of(st);
}

/* The role of a nest loop with the operand order swapped (M and N trade places). */
static isa_role swap_role(isa_role r) {
    return r == ISA_ROLE_M ? ISA_ROLE_N : r == ISA_ROLE_N ? ISA_ROLE_M : r;
}

static isa_dtype host_type(const loop_buffer *b) {
    return b->dtype == TE_F32 ? ISA_F32 : ISA_S32;
}

static void add_change(isa_mapping *m, char op, isa_change_kind kind, int loop, isa_dtype from,
                       isa_dtype to) {
    if (m->nchanges == ISA_MAX_CHANGES) return;
    m->changes[m->nchanges++] = (isa_change){op, kind, loop, from, to};
}

/* Conversions and re-layouts the mapping needs; false when it cannot work at all. */
static bool plan_changes(const isa_nest *nest, isa_mapping *m) {
    const isa_intrin *in = m->intrin;
    int ia = m->swapped ? 2 : 1, ib = m->swapped ? 1 : 2; /* strides of A and B */
    const loop_buffer *a = m->swapped ? nest->y : nest->x, *b = m->swapped ? nest->x : nest->y;
    /* integer instructions take integer data and float ones floats: no silent change of kind */
    bool int_instr = in->c_type == ISA_S32;
    if (int_instr != (nest->c->dtype == TE_I32)) return false;
    if (host_type(a) != in->a_type && !(int_instr && a->dtype == TE_I32))
        add_change(m, 'A', ISA_CHANGE_CONVERT, -1, host_type(a), in->a_type);
    if (host_type(b) != in->b_type && !(int_instr && b->dtype == TE_I32))
        add_change(m, 'B', ISA_CHANGE_CONVERT, -1, host_type(b), in->b_type);
    const isa_loop *n = &nest->loops[m->n_loop], *k = &nest->loops[m->k_loop];
    if (in->c_layout == ISA_LAYOUT_LANES || in->c_layout == ISA_LAYOUT_ROW) {
        if (n->stride[0] != 1) add_change(m, 'C', ISA_CHANGE_INNERMOST, m->n_loop, 0, 0);
    }
    if (in->device == ISA_DEVICE_CPU) {
        /* A is broadcast: its k group must be adjacent (one 32-bit broadcast of a pair/quad);
         * lanes over a shared axis load A as lanes instead */
        if (in->k_group > 1 && k->stride[ia] != 1)
            add_change(m, 'A', ISA_CHANGE_INNERMOST, m->k_loop, 0, 0);
        if (n->role == ISA_ROLE_SHARED && n->stride[ia] != 1)
            add_change(m, 'A', ISA_CHANGE_INNERMOST, m->n_loop, 0, 0);
        if (in->k_group > 1) {
            if (!(k->stride[ib] == 1 && n->stride[ib] == in->k_group))
                add_change(m, 'B', ISA_CHANGE_K_GROUPS, m->k_loop, 0, 0);
        } else if (n->stride[ib] != 1) {
            add_change(m, 'B', ISA_CHANGE_INNERMOST, m->n_loop, 0, 0);
        }
    } else {
        /* mma fragments: A row-major (k contiguous), B column-major (k contiguous) */
        if (k->stride[ia] != 1) add_change(m, 'A', ISA_CHANGE_INNERMOST, m->k_loop, 0, 0);
        if (k->stride[ib] != 1) add_change(m, 'B', ISA_CHANGE_INNERMOST, m->k_loop, 0, 0);
    }
    return true;
}

int isa_map(te_ctx *c, const isa_nest *nest, const isa_intrin *in, isa_mapping *out, int max) {
    isa_desc d;
    if (isa_intrin_describe(c, in, &d)) return 0;
    const te_expr *body = d.c->body;
    /* the description is a sum of products of two loads, as every accumulation found is */
    if (body->kind != TE_REDUCE || body->rop != TE_REDUCE_SUM || body->a->kind != TE_MUL)
        return 0;
    isa_role want_m = desc_role(&d, d.c->axes[0], true);
    isa_role want_n = desc_role(&d, d.c->axes[1], true);
    isa_role want_k = desc_role(&d, body->raxes[0], false);
    int count = 0;
    for (int sw = 0; sw < 2; sw++) {
        isa_role role[ISA_MAX_LOOPS];
        bool any_m = false;
        for (int i = 0; i < nest->nloops; i++) {
            role[i] = sw ? swap_role(nest->loops[i].role) : nest->loops[i].role;
            any_m |= role[i] == want_m;
        }
        for (int ni = 0; ni < nest->nloops; ni++) {
            const isa_loop *n = &nest->loops[ni];
            bool lane_ok = role[ni] == want_n ||
                           (in->lanes_over_shared && role[ni] == ISA_ROLE_SHARED);
            if (!lane_ok || n->extent % in->n) continue;
            for (int ki = 0; ki < nest->nloops; ki++) {
                const isa_loop *k = &nest->loops[ki];
                if (role[ki] != want_k || k->extent % in->k) continue;
                for (int mi = any_m ? 0 : -1; mi < nest->nloops; mi++) {
                    if (mi >= 0 && (role[mi] != want_m || nest->loops[mi].extent % in->m))
                        continue;
                    if (mi < 0 && in->m != 1) continue;
                    isa_mapping m = {.intrin = in, .swapped = sw, .m_loop = mi, .n_loop = ni,
                                     .k_loop = ki};
                    if (!plan_changes(nest, &m)) continue;
                    if (count < max) out[count] = m;
                    count++;
                }
            }
        }
    }
    return count;
}

const char *isa_role_name(isa_role r) {
    static const char *const names[] = {"M", "N", "K", "shared", "other"};
    return names[r];
}

static void loop_name(const isa_nest *nest, int i, strbuf *b) {
    if (i < 0) {
        sb_puts(b, "-");
        return;
    }
    sb_printf(b, "%s<%lld", nest->loops[i].var->name, (long long)nest->loops[i].extent);
}

void isa_mapping_print(const isa_nest *nest, const isa_mapping *m, strbuf *b) {
    sb_printf(b, "%s: m=", m->intrin->name);
    loop_name(nest, m->m_loop, b);
    sb_puts(b, " n=");
    loop_name(nest, m->n_loop, b);
    sb_puts(b, " k=");
    loop_name(nest, m->k_loop, b);
    sb_printf(b, " (A=%s B=%s)", m->swapped ? nest->y->name : nest->x->name,
              m->swapped ? nest->x->name : nest->y->name);
    for (int i = 0; i < m->nchanges; i++) {
        const isa_change *ch = &m->changes[i];
        sb_puts(b, i ? ", " : "; ");
        switch (ch->kind) {
        case ISA_CHANGE_CONVERT:
            sb_printf(b, "convert %c %s->%s", ch->operand, isa_dtype_name(ch->from),
                      isa_dtype_name(ch->to));
            break;
        case ISA_CHANGE_INNERMOST:
            sb_printf(b, "%c with %s innermost", ch->operand, nest->loops[ch->loop].var->name);
            break;
        case ISA_CHANGE_K_GROUPS:
            sb_printf(b, "pack %c in k groups of %d over %s", ch->operand, m->intrin->k_group,
                      nest->loops[ch->loop].var->name);
            break;
        }
    }
}
