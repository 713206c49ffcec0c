/*
 * querier_flame.c: merged stacks as a call tree, and the tree as the flame
 * graph Pyroscope's querier returns (`FlameGraph{names, levels, total,
 * max_self}`).
 *
 * The tree merges frames by function name, as Pyroscope does: a node is
 * (parent, name) and holds the total of the stacks through it and the self
 * value of those ending there. Nodes live in one array; a pl_htab keyed by
 * (parent, name) finds a child, so adding a stack costs one lookup per frame.
 *
 * The encoding (grafana.md A4): levels[d] lists the nodes at depth d left
 * to right, 4 values each: x minus the end (x + total) of the node before it
 * on that level, total, self, name index. Inside a parent its self value
 * comes first, then its children in name order; the root is "total". With
 * max_nodes, only nodes whose total reaches the max_nodes-th largest total
 * are drawn; the children cut away are summed into one `other` child.
 */
#include "store/querier_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

typedef struct qnode {
    int32_t parent, name;
    int64_t total, self;
    int32_t first_child, next_sibling; /* -1: none */
} qnode;

struct pl_qtree {
    pl_arena arena;      /* name copies */
    pl_intern names;     /* name -> index */
    const char **name_s; /* index -> name; [0] = "total" */
    size_t n_names, cap_names;
    qnode *nodes; /* [0] = root */
    size_t n_nodes, cap_nodes;
    pl_htab children; /* (parent, name) -> node index + 1 */
    bool sorted;
};

pl_qtree *pl_qtree_new(void)
{
    pl_qtree *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    pl_arena_init(&t->arena);
    if (pl_array_reserve((void **)&t->name_s, 0, &t->cap_names, sizeof(char *), 64) ||
        pl_array_reserve((void **)&t->nodes, 0, &t->cap_nodes, sizeof(qnode), 256)) {
        pl_qtree_free(t);
        return NULL;
    }
    t->name_s[t->n_names++] = "total";
    t->nodes[t->n_nodes++] = (qnode){-1, 0, 0, 0, -1, -1};
    return t;
}

void pl_qtree_free(pl_qtree *t)
{
    if (!t)
        return;
    pl_arena_free(&t->arena);
    pl_intern_free(&t->names);
    pl_htab_free(&t->children);
    free(t->name_s);
    free(t->nodes);
    free(t);
}

int32_t pl_qtree_name(pl_qtree *t, const char *name, size_t len)
{
    if (len > UINT32_MAX || t->n_names >= INT32_MAX)
        return -1;
    uint64_t h = pl_hash_bytes(name, len);
    size_t slot;
    int32_t at = pl_intern_find(&t->names, name, (uint32_t)len, h, &slot);
    if (at != 0)
        return at; /* the index, or -1 on OOM */
    char *copy = pl_arena_memdup(&t->arena, name, len);
    if (!copy ||
        pl_array_reserve((void **)&t->name_s, t->n_names, &t->cap_names, sizeof(char *), 64))
        return -1;
    int32_t id = (int32_t)t->n_names;
    if (pl_intern_add(&t->names, slot, name, (uint32_t)len, h, id))
        return -1;
    t->name_s[t->n_names++] = copy;
    return id;
}

typedef struct child_key {
    const pl_qtree *t;
    int32_t parent, name;
} child_key;

static bool child_eq(const void *ctx, uint32_t val)
{
    const child_key *k = ctx;
    const qnode *n = &k->t->nodes[val - 1];
    return n->parent == k->parent && n->name == k->name;
}

static int32_t child_of(pl_qtree *t, int32_t parent, int32_t name)
{
    uint32_t h = (uint32_t)pl_hash_u64(((uint64_t)(uint32_t)parent << 32) | (uint32_t)name);
    child_key k = {t, parent, name};
    uint32_t *slot = pl_htab_slot(&t->children, h, child_eq, &k);
    if (!slot)
        return -1;
    if (*slot)
        return (int32_t)(*slot - 1);
    if (t->n_nodes >= INT32_MAX - 1 ||
        pl_array_reserve((void **)&t->nodes, t->n_nodes, &t->cap_nodes, sizeof(qnode), 256))
        return -1;
    int32_t id = (int32_t)t->n_nodes++;
    t->nodes[id] = (qnode){parent, name, 0, 0, -1, t->nodes[parent].first_child};
    t->nodes[parent].first_child = id;
    *slot = (uint32_t)id + 1;
    pl_htab_added(&t->children, slot, h);
    t->sorted = false;
    return id;
}

int pl_qtree_add(pl_qtree *t, const int32_t *names, size_t n, int64_t value)
{
    int32_t at = 0;
    t->nodes[0].total += value;
    for (size_t i = 0; i < n; i++) {
        if (names[i] <= 0 || (size_t)names[i] >= t->n_names)
            return -1;
        at = child_of(t, at, names[i]);
        if (at < 0)
            return -1;
        t->nodes[at].total += value;
    }
    t->nodes[at].self += value;
    return 0;
}

int64_t pl_qtree_total(const pl_qtree *t)
{
    return t->nodes[0].total;
}

/* Room for `need` elements (growing by doubling at least). -1 on OOM. */
static int reserve(void **items, size_t need, size_t *cap, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    if (c > SIZE_MAX / elem)
        return -1;
    void *p = realloc(*items, c * elem);
    if (!p)
        return -1;
    *items = p;
    *cap = c;
    return 0;
}

static int by_name(const void *a, const void *b, void *ctx)
{
    const pl_qtree *t = ctx;
    const qnode *x = &t->nodes[*(const int32_t *)a];
    const qnode *y = &t->nodes[*(const int32_t *)b];
    return strcmp(t->name_s[x->name], t->name_s[y->name]);
}

/* Relinks every node's children in name order. */
static int sort_children(pl_qtree *t)
{
    if (t->sorted)
        return 0;
    int32_t *tmp = malloc(t->n_nodes * sizeof(int32_t));
    if (!tmp)
        return -1;
    for (size_t i = 0; i < t->n_nodes; i++) {
        size_t n = 0;
        for (int32_t c = t->nodes[i].first_child; c >= 0; c = t->nodes[c].next_sibling)
            tmp[n++] = c;
        if (n < 2)
            continue;
        qsort_r(tmp, n, sizeof(int32_t), by_name, t);
        t->nodes[i].first_child = tmp[0];
        for (size_t k = 0; k < n; k++)
            t->nodes[tmp[k]].next_sibling = k + 1 < n ? tmp[k + 1] : -1;
    }
    free(tmp);
    t->sorted = true;
    return 0;
}

static int desc_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The smallest total a node needs to be drawn (Pyroscope's minValue). */
static int min_value(const pl_qtree *t, int64_t max_nodes, int64_t *out)
{
    *out = 0;
    size_t n = t->n_nodes - 1;
    if (max_nodes <= 0 || n <= (size_t)max_nodes)
        return 0;
    int64_t *totals = malloc(n * sizeof(int64_t));
    if (!totals)
        return -1;
    for (size_t i = 0; i < n; i++)
        totals[i] = t->nodes[i + 1].total;
    qsort(totals, n, sizeof(int64_t), desc_i64);
    *out = totals[max_nodes - 1];
    free(totals);
    return 0;
}

typedef struct emit {
    pl_qflame *f;
    int64_t *level_end;
    size_t *level_cap;
    size_t cap_levels;
    int32_t *out_name; /* tree name index -> output index + 1 */
    int32_t other;     /* output index of "other", or -1 */
    const pl_qtree *t;
} emit;

static int out_name(emit *e, int32_t tree_name)
{
    if (e->out_name[tree_name])
        return e->out_name[tree_name] - 1;
    e->f->names[e->f->n_names] = e->t->name_s[tree_name];
    e->out_name[tree_name] = (int32_t)++e->f->n_names;
    return e->out_name[tree_name] - 1;
}

static int emit_node(emit *e, size_t depth, int64_t x, int64_t total, int64_t self, int64_t name)
{
    pl_qflame *f = e->f;
    if (depth >= e->cap_levels) {
        size_t cap = e->cap_levels ? e->cap_levels * 2 : 16;
        int64_t **lv = realloc(f->levels, cap * sizeof(*lv));
        if (lv)
            f->levels = lv;
        size_t *ll = realloc(f->level_len, cap * sizeof(*ll));
        if (ll)
            f->level_len = ll;
        size_t *lc = realloc(e->level_cap, cap * sizeof(*lc));
        if (lc)
            e->level_cap = lc;
        int64_t *le = realloc(e->level_end, cap * sizeof(*le));
        if (le)
            e->level_end = le;
        if (!lv || !ll || !lc || !le)
            return -1;
        for (size_t i = e->cap_levels; i < cap; i++) {
            f->levels[i] = NULL;
            f->level_len[i] = 0;
            e->level_cap[i] = 0;
            e->level_end[i] = 0;
        }
        e->cap_levels = cap;
    }
    if (depth >= f->n_levels)
        f->n_levels = depth + 1;
    if (reserve((void **)&f->levels[depth], f->level_len[depth] + 4, &e->level_cap[depth],
                sizeof(int64_t)))
        return -1;
    int64_t *v = f->levels[depth] + f->level_len[depth];
    v[0] = x - e->level_end[depth];
    v[1] = total;
    v[2] = self;
    v[3] = name;
    f->level_len[depth] += 4;
    e->level_end[depth] = x + total;
    if (self > f->max_self)
        f->max_self = self;
    return 0;
}

typedef struct frame {
    int32_t node; /* -1: an `other` node of `total` */
    size_t depth;
    int64_t x, total;
} frame;

int pl_qtree_flamegraph(pl_qtree *t, int64_t max_nodes, pl_qflame *f)
{
    memset(f, 0, sizeof(*f));
    if (max_nodes <= 0)
        max_nodes = PL_QFLAME_DEFAULT_NODES;
    if (max_nodes > PL_QFLAME_MAX_NODES)
        max_nodes = PL_QFLAME_MAX_NODES;
    int64_t min_total;
    if (sort_children(t) || min_value(t, max_nodes, &min_total))
        return -1;
    emit e = {f, NULL, NULL, 0, NULL, -1, t};
    f->names = calloc(t->n_names + 1, sizeof(char *));
    e.out_name = calloc(t->n_names, sizeof(int32_t));
    frame *stack = NULL;
    size_t n_stack = 0, cap_stack = 0;
    int rc = (f->names && e.out_name) ? 0 : -1;
    if (rc == 0) {
        out_name(&e, 0); /* "total" first */
        f->total = t->nodes[0].total;
        rc = reserve((void **)&stack, 1, &cap_stack, sizeof(frame));
        if (rc == 0)
            stack[n_stack++] = (frame){0, 0, 0, t->nodes[0].total};
    }
    int32_t *kids = NULL;
    size_t cap_kids = 0;
    while (rc == 0 && n_stack) {
        frame fr = stack[--n_stack];
        if (fr.node < 0) {
            if (e.other < 0) {
                e.other = (int32_t)f->n_names;
                f->names[f->n_names++] = "other";
            }
            rc = emit_node(&e, fr.depth, fr.x, fr.total, fr.total, e.other);
            continue;
        }
        const qnode *n = &t->nodes[fr.node];
        rc = emit_node(&e, fr.depth, fr.x, n->total, n->self, out_name(&e, n->name));
        if (rc)
            break;
        /* children in order, then `other`; pushed in reverse */
        size_t n_kids = 0;
        int64_t other = 0;
        for (int32_t c = n->first_child; c >= 0 && rc == 0; c = t->nodes[c].next_sibling) {
            if (t->nodes[c].total < min_total) {
                other += t->nodes[c].total;
                continue;
            }
            rc = reserve((void **)&kids, n_kids + 1, &cap_kids, sizeof(int32_t));
            if (rc == 0)
                kids[n_kids++] = c;
        }
        if (rc || reserve((void **)&stack, n_stack + n_kids + 1, &cap_stack, sizeof(frame))) {
            rc = -1;
            break;
        }
        int64_t x = fr.x + n->self;
        int64_t end = x;
        for (size_t k = 0; k < n_kids; k++)
            end += t->nodes[kids[k]].total;
        if (other > 0)
            stack[n_stack++] = (frame){-1, fr.depth + 1, end, other};
        for (size_t k = n_kids; k-- > 0;) {
            end -= t->nodes[kids[k]].total;
            stack[n_stack++] = (frame){kids[k], fr.depth + 1, end, t->nodes[kids[k]].total};
        }
    }
    free(kids);
    free(stack);
    free(e.out_name);
    free(e.level_cap);
    free(e.level_end);
    if (rc)
        pl_qflame_free(f);
    return rc;
}

void pl_qflame_free(pl_qflame *f)
{
    for (size_t i = 0; i < f->n_levels; i++)
        free(f->levels[i]);
    free(f->levels);
    free(f->level_len);
    free(f->names);
    memset(f, 0, sizeof(*f));
}

int pl_qtree_stacks(const pl_qtree *t, pl_qtree_stack_fn fn, void *arg)
{
    const char **frames = NULL;
    size_t cap = 0;
    for (size_t i = 1; i < t->n_nodes; i++) {
        if (t->nodes[i].self <= 0)
            continue;
        size_t n = 0;
        for (int32_t at = (int32_t)i; at > 0; at = t->nodes[at].parent) {
            if (reserve((void **)&frames, n + 1, &cap, sizeof(char *))) {
                free(frames);
                return -1;
            }
            frames[n++] = t->name_s[t->nodes[at].name];
        }
        fn(arg, frames, n, t->nodes[i].self);
    }
    free(frames);
    return 0;
}
