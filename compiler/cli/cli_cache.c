/*
 * cli_cache.c: `kjit cache list|stats|clear`, the disk cache as a user sees it.
 *
 *   list    one line per entry: kind, payload size, last use, and the key's
 *           symbol and target lines (entries that do not read are marked)
 *   stats   the folder, its limit, the entry count and total size by kind
 *   clear   removes the entries kjit wrote (and its temporary files and
 *           the folder's secret), never another file, and says how many
 *
 * The folder is the one the runtime uses ($KJIT_CACHE_DIR, $XDG_CACHE_HOME/kjit
 * or ~/.cache/kjit); `--dir DIR` names another.  list and stats also say
 * when the runtime would refuse the folder or KJIT_CACHE_MAX (on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char cache_usage[] =
    "usage: kjit cache list|stats|clear [--dir DIR]\n"
    "  list    every entry: kind, size, last use, function and target\n"
    "  stats   folder, limit (KJIT_CACHE_MAX), entries and bytes by kind\n"
    "  clear   remove the entries kjit wrote (other files stay)\n";

/* The value of `field=` in a key's text, up to the end of its line. */
static void key_field(const char *key, const char *field, char *out, size_t size)
{
    out[0] = '\0';
    size_t n = strlen(field);
    for (const char *line = key; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > n && strncmp(line, field, n) == 0 && line[n] == '=') {
            snprintf(out, size, "%.*s", (int)(len - n - 1), line + n + 1);
            return;
        }
        line = end ? end + 1 : NULL;
    }
}

static void print_entry(void *user, const kjit_cache_entry *entry)
{
    if (!entry->valid) {
        printf("%-10s %10llu  %-19s  %s (damaged: replaced on next use)\n", "?",
               (unsigned long long)entry->file_bytes, "-", entry->name);
        return;
    }
    char when[32], symbol[200], target[200];
    time_t t = (time_t)entry->last_used;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&t));
    key_field(entry->key_text, "symbol", symbol, sizeof symbol);
    key_field(entry->key_text, "target", target, sizeof target);
    if (strlen(target) > 48)
        strcpy(target + 45, "...");
    printf("%-10s %10llu  %s  %-28s %s\n", entry->kind,
           (unsigned long long)entry->payload_bytes, when, symbol, target);
}

static const char *const kinds[] = {"cpu-object", "ptx", "cubin"};
#define KIND_COUNT (int)(sizeof kinds / sizeof *kinds)

typedef struct Totals {
    int entries[KIND_COUNT], damaged;
    unsigned long long bytes[KIND_COUNT], damaged_bytes;
} Totals;

static void add_entry(void *user, const kjit_cache_entry *entry)
{
    Totals *totals = user;
    if (!entry->valid) {
        totals->damaged++;
        totals->damaged_bytes += entry->file_bytes;
        return;
    }
    for (int k = 0; k < KIND_COUNT; k++)
        if (strcmp(entry->kind, kinds[k]) == 0) {
            totals->entries[k]++;
            totals->bytes[k] += entry->file_bytes;
        }
}

static void print_size(unsigned long long bytes)
{
    if (bytes >= 1ull << 30)
        printf("%.2f GiB", (double)bytes / (1ull << 30));
    else if (bytes >= 1ull << 20)
        printf("%.2f MiB", (double)bytes / (1ull << 20));
    else if (bytes >= 1ull << 10)
        printf("%.1f KiB", (double)bytes / (1ull << 10));
    else
        printf("%llu B", bytes);
}

int kj_cli_cache(int argc, char **argv)
{
    const char *action = NULL;
    char dir[4096] = "";
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            snprintf(dir, sizeof dir, "%s", argv[++i]);
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(cache_usage, stdout);
            return 0;
        } else if (!action && argv[i][0] != '-') {
            action = argv[i];
        } else {
            fprintf(stderr, "kjit cache: unexpected argument '%s'\n%s", argv[i], cache_usage);
            return 2;
        }
    }
    if (!action) {
        fputs(cache_usage, stderr);
        return 2;
    }
    if (!dir[0] && !kjit_cache_dir(dir, sizeof dir)) {
        fprintf(stderr, "kjit cache: no cache folder (set KJIT_CACHE_DIR or HOME)\n");
        return 2;
    }
    bool reading = strcmp(action, "list") == 0 || strcmp(action, "stats") == 0;
    char *warnings = reading ? kjit_cache_check(dir) : NULL;
    if (warnings) {
        fputs(warnings, stderr);
        free(warnings);
    }
    if (strcmp(action, "list") == 0) {
        printf("%-10s %10s  %-19s  %-28s %s\n", "kind", "bytes", "last used", "function", "target");
        kjit_cache_list(dir, print_entry, NULL);
        return 0;
    }
    if (strcmp(action, "stats") == 0) {
        Totals totals;
        memset(&totals, 0, sizeof totals);
        int n = kjit_cache_list(dir, add_entry, &totals);
        printf("folder:   %s%s\n", dir, n < 0 ? " (not created yet)" : "");
        printf("enabled:  %s\n", kjit_cache_enabled() ? "yes" : "no (KJIT_CACHE=off)");
        printf("limit:    ");
        print_size(kjit_cache_max_bytes());
        printf(" (KJIT_CACHE_MAX)\n");
        unsigned long long total = totals.damaged_bytes;
        for (int k = 0; k < KIND_COUNT; k++) {
            printf("%-10s %5d entries, ", kinds[k], totals.entries[k]);
            print_size(totals.bytes[k]);
            printf("\n");
            total += totals.bytes[k];
        }
        if (totals.damaged)
            printf("damaged    %5d entries (replaced on next use)\n", totals.damaged);
        printf("total:    ");
        print_size(total);
        printf("\nbuild:    %s\n", kjit_cache_build_identity());
        return 0;
    }
    if (strcmp(action, "clear") == 0) {
        int removed = kjit_cache_clear(dir);
        if (removed < 0) {
            printf("nothing to remove: %s is not a folder kjit can open\n", dir);
            return 0;
        }
        printf("removed %d cache entr%s from %s\n", removed, removed == 1 ? "y" : "ies", dir);
        return 0;
    }
    fprintf(stderr, "kjit cache: unknown action '%s'\n%s", action, cache_usage);
    return 2;
}
