/*
 * corpus.c: the .kern sources the harness runs.  Files are taken as they
 * are; the unit tests keep their programs as C string literals, so each run
 * of adjacent literals (the C compiler joins them into one string) in
 * the C files of tests/unit is decoded, and kept when it defines a kernel or a
 * vectorized, generalized or reduce function.  A literal that is a format
 * (snprintf'd before use) or a program meant to fail does not compile; the
 * harness counts those and goes on.
 */
#include "modes.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct List {
    ModesSource *items;
    int count, cap;
} List;

static void push(List *list, ModesSource source)
{
    if (list->count == list->cap) {
        list->cap = list->cap ? list->cap * 2 : 64;
        list->items = realloc(list->items, (size_t)list->cap * sizeof *list->items);
        if (!list->items)
            abort();
    }
    list->items[list->count++] = source;
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (!s)
        abort();
    snprintf(s, n, "%s/%s", a, b);
    return s;
}

static char *read_whole(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    if (!text || fread(text, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(text);
        return NULL;
    }
    text[n] = 0;
    fclose(f);
    return text;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir ending in suffix, sorted. */
static int list_dir(const char *dir, const char *suffix, char ***out)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **names = NULL;
    int count = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name), s = strlen(suffix);
        if (n <= s || strcmp(e->d_name + n - s, suffix) != 0 || e->d_name[0] == '.')
            continue;
        names = realloc(names, (size_t)(count + 1) * sizeof *names);
        names[count++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)count, sizeof *names, by_name);
    *out = names;
    return count;
}

static bool defines_runnable(const char *text)
{
    return strstr(text, "@kernel") || strstr(text, "@vectorize") || strstr(text, "@guvectorize") ||
           strstr(text, "@reduce");
}

static void add_files(List *list, const char *root, const char *dir)
{
    char *full = join(root, dir);
    char **names;
    int n = list_dir(full, ".kern", &names);
    for (int i = 0; i < n; i++) {
        char *rel = join(dir, names[i]);
        char *path = join(root, rel);
        char *text = read_whole(path);
        if (text && defines_runnable(text))
            push(list, (ModesSource){.name = rel, .file = strdup(rel), .path = path});
        else {
            free(rel);
            free(path);
        }
        free(text);
        free(names[i]);
    }
    if (n > 0)
        free(names);
    free(full);
}

/* ------------------------------------------------- C string literals */

typedef struct Buffer {
    char *data;
    size_t len, cap;
} Buffer;

static void buffer_put(Buffer *b, char c)
{
    if (b->len + 2 > b->cap) {
        b->cap = b->cap ? b->cap * 2 : 256;
        b->data = realloc(b->data, b->cap);
        if (!b->data)
            abort();
    }
    b->data[b->len++] = c;
    b->data[b->len] = 0;
}

/* Decodes the literal whose opening quote is at *p into b; leaves *p after
 * its closing quote and counts the lines it crosses. */
static void decode_literal(const char **p, Buffer *b, int *line)
{
    const char *s = *p + 1;
    while (*s && *s != '"') {
        if (*s == '\n')
            (*line)++;
        if (*s != '\\') {
            buffer_put(b, *s++);
            continue;
        }
        s++;
        switch (*s) {
        case 'n': buffer_put(b, '\n'); s++; break;
        case 't': buffer_put(b, '\t'); s++; break;
        case 'r': buffer_put(b, '\r'); s++; break;
        case '0': buffer_put(b, '\0' + 1); s++; break; /* a NUL would end the text: keep a mark */
        case '\n': (*line)++; s++; break;
        case 'x': {
            s++;
            unsigned v = 0;
            while ((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') || (*s >= 'A' && *s <= 'F')) {
                v = v * 16 + (unsigned)(*s <= '9' ? *s - '0' : (*s | 32) - 'a' + 10);
                s++;
            }
            buffer_put(b, (char)(v ? v : 1));
            break;
        }
        default:
            if (*s)
                buffer_put(b, *s++);
        }
    }
    *p = *s ? s + 1 : s;
}

/* Skips blanks, newlines, comments and line continuations (what may sit
 * between two literals the compiler joins); counts the lines. */
static const char *skip_between(const char *s, int *line)
{
    for (;;) {
        if (*s == '\n') {
            (*line)++;
            s++;
        } else if (*s == ' ' || *s == '\t' || *s == '\r') {
            s++;
        } else if (s[0] == '\\' && s[1] == '\n') {
            (*line)++;
            s += 2;
        } else if (s[0] == '/' && s[1] == '/') {
            while (*s && *s != '\n')
                s++;
        } else if (s[0] == '/' && s[1] == '*') {
            s += 2;
            while (*s && !(s[0] == '*' && s[1] == '/')) {
                if (*s == '\n')
                    (*line)++;
                s++;
            }
            if (*s)
                s += 2;
        } else {
            return s;
        }
    }
}

static bool seen_text(const List *list, const char *text)
{
    for (int i = 0; i < list->count; i++)
        if (list->items[i].text && strcmp(list->items[i].text, text) == 0)
            return true;
    return false;
}

static void add_literals(List *list, const char *root, const char *rel)
{
    char *path = join(root, rel);
    char *text = read_whole(path);
    free(path);
    if (!text)
        return;
    int line = 1;
    const char *s = text;
    while (*s) {
        if (s[0] == '/' && s[1] == '/') {
            while (*s && *s != '\n')
                s++;
        } else if (s[0] == '/' && s[1] == '*') {
            s += 2;
            while (*s && !(s[0] == '*' && s[1] == '/')) {
                if (*s == '\n')
                    line++;
                s++;
            }
            if (*s)
                s += 2;
        } else if (*s == '\'') { /* a character constant: '"' is not a literal */
            s++;
            while (*s && *s != '\'') {
                if (*s == '\\' && s[1])
                    s++;
                s++;
            }
            if (*s)
                s++;
        } else if (*s == '"') {
            int start = line;
            Buffer b = {0};
            buffer_put(&b, 0);
            b.len = 0;
            for (;;) {
                decode_literal(&s, &b, &line);
                const char *next = skip_between(s, &line);
                if (*next != '"')
                    break;
                s = next;
            }
            if (b.data && defines_runnable(b.data) && strstr(b.data, "fn ") &&
                !seen_text(list, b.data)) {
                char name[512];
                snprintf(name, sizeof name, "%s:%d", rel, start);
                push(list, (ModesSource){.name = strdup(name), .file = strdup(rel), .text = b.data});
            } else {
                free(b.data);
            }
        } else {
            if (*s == '\n')
                line++;
            s++;
        }
    }
    free(text);
}

static int by_source_name(const void *a, const void *b)
{
    return strcmp(((const ModesSource *)a)->name, ((const ModesSource *)b)->name);
}

int modes_corpus(const char *root, ModesSource **out)
{
    List list = {0};
    char *golden = join(root, "tests/golden");
    char **groups;
    int ngroups = 0;
    DIR *d = opendir(golden);
    if (d) {
        groups = NULL;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.' || strchr(e->d_name, '.'))
                continue;
            groups = realloc(groups, (size_t)(ngroups + 1) * sizeof *groups);
            groups[ngroups++] = strdup(e->d_name);
        }
        closedir(d);
        qsort(groups, (size_t)ngroups, sizeof *groups, by_name);
        for (int i = 0; i < ngroups; i++) {
            char *dir = join("tests/golden", groups[i]);
            add_files(&list, root, dir);
            free(dir);
            free(groups[i]);
        }
        free(groups);
    }
    free(golden);
    add_files(&list, root, "examples");
    add_files(&list, root, "stdlib");
    char *unit = join(root, "tests/unit");
    char **names;
    int n = list_dir(unit, ".c", &names);
    for (int i = 0; i < n; i++) {
        char *rel = join("tests/unit", names[i]);
        add_literals(&list, root, rel);
        free(rel);
        free(names[i]);
    }
    if (n > 0)
        free(names);
    free(unit);
    if (list.count == 0) {
        fprintf(stderr, "modes: no .kern sources under %s (tests/golden, examples, stdlib, "
                        "tests/unit)\n", root);
        return -1;
    }
    qsort(list.items, (size_t)list.count, sizeof *list.items, by_source_name);
    *out = list.items;
    return list.count;
}
