/*
 * sqlite_svg.c: flame graphs from folded stacks, as a self-contained SVG
 * (what `proflink query flamegraph --format svg` writes) and as a nested
 * JSON tree ({name, value, children}, the shape d3-flame-graph and most web
 * flame graph widgets read) for the query API.
 *
 * Both build the same call tree: the folded stacks are merged frame by frame
 * into a trie. The SVG is the classic layout (root at the bottom, width
 * proportional to value, children left to right by name) with a <title> on
 * every frame for the hover text and a few lines of inline script for
 * click-to-zoom; with scripts disabled it is still a complete picture.
 * Frames narrower than 0.1 pixel are not drawn, which bounds the output for
 * huge profiles.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite_store.h"

#define MAX_DEPTH 1024

typedef struct fnode {
    const char *name;
    size_t name_len;
    int64_t value;
    int32_t first_child, last_child, next_sibling;
} fnode;

typedef struct ftree {
    fnode *nodes;
    size_t n, cap;
    int max_depth;
    bool failed;
} ftree;

static int32_t tree_add(ftree *t, const char *name, size_t len)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        fnode *grown = realloc(t->nodes, cap * sizeof(fnode));
        if (!grown) {
            t->failed = true;
            return -1;
        }
        t->nodes = grown;
        t->cap = cap;
    }
    t->nodes[t->n] = (fnode){name, len, 0, -1, -1, -1};
    return (int32_t)t->n++;
}

static int32_t child_of(ftree *t, int32_t parent, const char *name, size_t len)
{
    fnode *p = &t->nodes[parent];
    if (p->last_child >= 0) { /* sorted input: the last child matches most often */
        fnode *c = &t->nodes[p->last_child];
        if (c->name_len == len && memcmp(c->name, name, len) == 0)
            return p->last_child;
    }
    for (int32_t c = p->first_child; c >= 0; c = t->nodes[c].next_sibling)
        if (t->nodes[c].name_len == len && memcmp(t->nodes[c].name, name, len) == 0)
            return c;
    int32_t idx = tree_add(t, name, len);
    if (idx < 0)
        return -1;
    p = &t->nodes[parent]; /* tree_add may have moved the array */
    if (p->last_child < 0)
        p->first_child = idx;
    else
        t->nodes[p->last_child].next_sibling = idx;
    p->last_child = idx;
    return idx;
}

static void tree_build(ftree *t, const pl_profile_result *prof)
{
    memset(t, 0, sizeof(*t));
    if (tree_add(t, "all", 3) < 0)
        return;
    for (size_t i = 0; i < prof->n_stacks && !t->failed; i++) {
        const pl_folded_stack *fs = &prof->stacks[i];
        if (fs->value <= 0)
            continue;
        t->nodes[0].value += fs->value;
        int32_t cur = 0;
        int depth = 0;
        const char *p = fs->frames;
        while (*p && depth < MAX_DEPTH) {
            const char *end = strchr(p, ';');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            cur = child_of(t, cur, p, len);
            if (cur < 0)
                return;
            t->nodes[cur].value += fs->value;
            depth++;
            if (!end)
                break;
            p = end + 1;
        }
        if (depth > t->max_depth)
            t->max_depth = depth;
    }
}

static void xml_escape(pl_buf *b, const char *s, size_t len)
{
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        const char *rep = NULL;
        switch (s[i]) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&#39;";
            break;
        default:
            if ((unsigned char)s[i] < 0x20)
                rep = " ";
        }
        if (!rep)
            continue;
        pl_buf_append(b, s + start, i - start);
        pl_buf_append_str(b, rep);
        start = i + 1;
    }
    pl_buf_append(b, s + start, len - start);
}

static void format_value(const pl_profile_result *prof, int64_t v, char *out, size_t cap)
{
    if (strcmp(prof->unit, "nanoseconds") == 0 && v >= 0)
        pl_format_duration((uint64_t)v, out, cap);
    else if (strcmp(prof->unit, "count") == 0)
        snprintf(out, cap, "%" PRId64 " samples", v);
    else
        snprintf(out, cap, "%" PRId64 "%s%s", v, *prof->unit ? " " : "", prof->unit);
}

static uint32_t name_hash(const char *s, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

#define SVG_WIDTH  1200.0
#define FRAME_H    16
#define PAD_X      10.0
#define PAD_TOP    40
#define PAD_BOTTOM 24
#define CHAR_W     6.6

typedef struct svg_ctx {
    const ftree *t;
    const pl_profile_result *prof;
    pl_buf *out;
    double scale; /* pixels per unit of value */
    int height;
} svg_ctx;

static void svg_frame(svg_ctx *c, int32_t idx, double x, int depth)
{
    const fnode *n = &c->t->nodes[idx];
    double w = (double)n->value * c->scale;
    if (w < 0.1)
        return;
    double y = c->height - PAD_BOTTOM - (depth + 1) * FRAME_H;
    char val[64];
    format_value(c->prof, n->value, val, sizeof(val));
    double pct = c->t->nodes[0].value ? 100.0 * (double)n->value / (double)c->t->nodes[0].value : 0;
    uint32_t h = name_hash(n->name, n->name_len);
    int r = 205 + (int)(h % 50), g = (int)((h >> 8) % 230), b = (int)((h >> 16) % 55);
    if (idx == 0) {
        r = 220;
        g = 220;
        b = 220;
    }
    pl_buf *o = c->out;
    pl_buf_printf(o, "<g class=\"f\"><title>");
    xml_escape(o, n->name, n->name_len);
    pl_buf_printf(o, " (%s, %.2f%%)</title>", val, pct);
    pl_buf_printf(o,
                  "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" fill=\"rgb(%d,%d,%d)\" "
                  "rx=\"2\"/>",
                  x, y, w, FRAME_H - 1, r, g, b);
    size_t fit = w > 8 ? (size_t)((w - 6) / CHAR_W) : 0;
    if (fit >= 3) {
        pl_buf_printf(o, "<text x=\"%.1f\" y=\"%.0f\">", x + 3, y + FRAME_H - 4.5);
        if (n->name_len <= fit) {
            xml_escape(o, n->name, n->name_len);
        } else {
            xml_escape(o, n->name, fit - 2);
            pl_buf_append_str(o, "..");
        }
        pl_buf_append_str(o, "</text>");
    }
    pl_buf_append_str(o, "</g>\n");
    double cx = x;
    for (int32_t ch = n->first_child; ch >= 0; ch = c->t->nodes[ch].next_sibling) {
        svg_frame(c, ch, cx, depth + 1);
        cx += (double)c->t->nodes[ch].value * c->scale;
    }
}

/* Click a frame to zoom to it; click the root ("all") to reset. Scales the
 * frames above the clicked one horizontally and hides the others. */
static const char zoom_script[] =
    "<script><![CDATA[\n"
    "(function(){var W="
    "%.0f"
    ",P="
    "%.0f"
    ";\n"
    "var gs=[].slice.call(document.querySelectorAll('g.f'));\n"
    "gs.forEach(function(g){var r=g.querySelector('rect'),t=g.querySelector('text');"
    "g.o={x:+r.getAttribute('x'),y:+r.getAttribute('y'),w:+r.getAttribute('width'),"
    "l:t?t.textContent:null,n:g.querySelector('title').textContent.replace(/ \\([^(]*$/,'')};"
    "g.onclick=function(){zoom(g)};});\n"
    "function zoom(z){var o=z.o,k=(W-2*P)/o.w;gs.forEach(function(g){var r=g.querySelector('rect'),"
    "t=g.querySelector('text'),p=g.o,in_=p.y<=o.y&&p.x>=o.x-1e-6&&p.x+p.w<=o.x+o.w+1e-6,"
    "below=p.y>o.y&&p.x<=o.x+1e-6&&p.x+p.w>=o.x+o.w-1e-6;"
    "if(!in_&&!below){g.style.display='none';return;}g.style.display='';"
    "var x=below?P:P+(p.x-o.x)*k,w=below?W-2*P:p.w*k;r.setAttribute('x',x);"
    "r.setAttribute('width',w);if(t){t.setAttribute('x',x+3);var f=Math.floor((w-6)/%.1f);"
    "t.textContent=f<3?'':(p.n.length<=f?p.n:p.n.slice(0,f-2)+'..');}});}\n"
    "})();\n]]></script>\n";

void pl_flamegraph_svg(const pl_profile_result *prof, const char *title, pl_buf *out)
{
    ftree t;
    tree_build(&t, prof);
    int depth = t.max_depth + 1;
    int height = PAD_TOP + depth * FRAME_H + PAD_BOTTOM;
    if (height < 120)
        height = 120;
    pl_buf_printf(out,
                  "<?xml version=\"1.0\" standalone=\"no\"?>\n"
                  "<svg version=\"1.1\" width=\"%.0f\" height=\"%d\" viewBox=\"0 0 %.0f %d\" "
                  "xmlns=\"http://www.w3.org/2000/svg\">\n"
                  "<style>text{font-family:Verdana,sans-serif;font-size:11px;fill:#000}"
                  "g.f:hover rect{stroke:#000;stroke-width:0.5;cursor:pointer}"
                  ".h{font-size:15px;text-anchor:middle}.s{font-size:11px;fill:#555}</style>\n"
                  "<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#fdfdf5\"/>\n"
                  "<text class=\"h\" x=\"%.0f\" y=\"22\">",
                  SVG_WIDTH, height, SVG_WIDTH, height, SVG_WIDTH / 2);
    xml_escape(out, title ? title : "flame graph", title ? strlen(title) : 11);
    char total[64];
    format_value(prof, t.n ? t.nodes[0].value : 0, total, sizeof(total));
    pl_buf_printf(out, "</text>\n<text class=\"s\" x=\"%.0f\" y=\"%d\">", PAD_X, height - 8);
    pl_buf_append_str(out, prof->type);
    pl_buf_printf(out,
                  " total %s, %zu stacks; click a frame to zoom, the bottom bar resets</text>\n",
                  total, prof->n_stacks);
    if (!t.failed && t.n && t.nodes[0].value > 0) {
        svg_ctx c = {&t, prof, out, (SVG_WIDTH - 2 * PAD_X) / (double)t.nodes[0].value, height};
        svg_frame(&c, 0, PAD_X, 0);
    } else {
        pl_buf_printf(out, "<text class=\"h\" x=\"%.0f\" y=\"%d\">no samples</text>\n",
                      SVG_WIDTH / 2, height / 2);
    }
    pl_buf_printf(out, zoom_script, SVG_WIDTH, PAD_X, CHAR_W);
    pl_buf_append_str(out, "</svg>\n");
    free(t.nodes);
}

static void json_node(const ftree *t, int32_t idx, pl_buf *out)
{
    const fnode *n = &t->nodes[idx];
    pl_buf_append_str(out, "{\"name\":");
    pl_buf_json_string(out, n->name, n->name_len);
    pl_buf_printf(out, ",\"value\":%" PRId64 ",\"children\":[", n->value);
    for (int32_t c = n->first_child; c >= 0; c = t->nodes[c].next_sibling) {
        if (c != n->first_child)
            pl_buf_append_byte(out, ',');
        json_node(t, c, out);
    }
    pl_buf_append_str(out, "]}");
}

void pl_flamegraph_json_tree(const pl_profile_result *prof, pl_buf *out)
{
    ftree t;
    tree_build(&t, prof);
    if (t.failed || !t.n) {
        out->failed = true;
    } else {
        json_node(&t, 0, out);
    }
    free(t.nodes);
}
