/*
 * cli_args.c: what `kjit run` and `kjit bench` share, so that both read their
 * arguments the same way: the function's arguments from .npy files, literals
 * or generators (zeros|ones|rand|randn|arange:[DTYPE:]SHAPE) drawn from one
 * seeded random stream, launch shapes, and reading elements of any dtype.
 *
 * The generators' stream is xorshift64*, so a seed gives the same arrays on
 * every machine: a bench on the GPU machine and one here see the same inputs.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"

static _Noreturn void out_of_memory(void)
{
    fputs("kjit: out of memory\n", stderr);
    exit(2);
}

void *kj_cli_xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p)
        out_of_memory();
    return p;
}

void *kj_cli_xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        out_of_memory();
    return p;
}

char *kj_cli_xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        out_of_memory();
    return p;
}

void kj_cli_printf(KjCliBuf *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *piece;
    int n = vasprintf(&piece, fmt, ap);
    va_end(ap);
    if (n < 0)
        out_of_memory();
    char *grown = realloc(buf->data, buf->len + (size_t)n + 1);
    if (!grown)
        out_of_memory();
    memcpy(grown + buf->len, piece, (size_t)n + 1);
    buf->data = grown;
    buf->len += (size_t)n;
    free(piece);
}

void kj_cli_buf_free(KjCliBuf *buf)
{
    free(buf->data);
    buf->data = NULL;
    buf->len = 0;
}

double kj_cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

bool kj_cli_is_warning(const char *diagnostic)
{
    return strncmp(diagnostic, "kjit: warning: ", 15) == 0;
}

bool kj_cli_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* "X[,Y[,Z]]" with every extent >= 1. */
bool kj_cli_parse_dim3(const char *text, uint32_t out[3])
{
    out[0] = out[1] = out[2] = 1;
    for (int d = 0; d < 3; d++) {
        char *end;
        double v = strtod(text, &end);
        if (end == text || v < 1 || v > 4294967295.0 || v != floor(v))
            return false;
        out[d] = (uint32_t)v;
        if (*end == '\0')
            return true;
        if (*end != ',')
            return false;
        text = end + 1;
    }
    return false;
}

static int launch_shape_option(int argc, char **argv, int *i, uint32_t grid[3], uint32_t block[3],
                               bool *has_grid, bool *has_block, char *why, size_t why_size)
{
    const char *a = argv[*i], *value = NULL;
    bool is_grid;
    if (KJ_CLI_OPTION_AT(*i, "--grid"))
        is_grid = true;
    else if (KJ_CLI_OPTION_AT(*i, "--block"))
        is_grid = false;
    else
        return 0;
    if (!value || !kj_cli_parse_dim3(value, is_grid ? grid : block)) {
        snprintf(why, why_size, "%s takes X[,Y[,Z]] with extents >= 1, not '%s'",
                 is_grid ? "--grid" : "--block", value ? value : "");
        return -1;
    }
    *(is_grid ? has_grid : has_block) = true;
    return 1;
}

static int shared_bytes_option(int argc, char **argv, int *i, size_t *bytes, char *why,
                               size_t why_size)
{
    const char *a = argv[*i], *value = NULL;
    if (!KJ_CLI_OPTION_AT(*i, "--shared-bytes"))
        return 0;
    char *end = NULL;
    unsigned long long n = value && value[0] >= '0' && value[0] <= '9' ? strtoull(value, &end, 10) : 0;
    if (!value || !end || end == value || *end != '\0' || n > ((unsigned long long)1 << 30)) {
        snprintf(why, why_size, "--shared-bytes takes a byte count from 0 to 1073741824, not '%s'",
                 value ? value : "");
        return -1;
    }
    *bytes = (size_t)n;
    return 1;
}

void kj_cli_call_init(KjCliCall *call)
{
    memset(call, 0, sizeof *call);
    call->seed = 1;
}

int kj_cli_call_argument(int argc, char **argv, int *i, KjCliCall *call, char *why,
                         size_t why_size)
{
    const char *a = argv[*i], *value = NULL;
    if (a[0] != '-' || a[1] == '\0' || kj_cli_is_number(a)) {
        if (!call->file) {
            call->file = a;
        } else if (!call->function) {
            call->function = a;
        } else if (call->arg_count == KJ_CLI_MAX_ARGS) {
            snprintf(why, why_size, "too many arguments (at most %d)", KJ_CLI_MAX_ARGS);
            return -1;
        } else {
            call->args[call->arg_count++] = a;
        }
        return 1;
    }
    int taken = launch_shape_option(argc, argv, i, call->grid, call->block, &call->has_grid,
                                    &call->has_block, why, why_size);
    if (taken == 0)
        taken = shared_bytes_option(argc, argv, i, &call->shared_bytes, why, why_size);
    if (taken != 0)
        return taken;
    if (KJ_CLI_OPTION_AT(*i, "--seed")) {
        kjit_arg seed;
        char *message = NULL;
        if (!value || !kj_cli_parse_number(value, KJIT_U64, &seed, &message)) {
            snprintf(why, why_size, "--seed takes a whole number from 0 to 2^64 - 1, not '%s'",
                     value ? value : "");
            free(message);
            return -1;
        }
        call->seed = seed.value.u;
        return 1;
    }
    if (strcmp(a, "--lineinfo") == 0) {
        call->line_info = true;
        return 1;
    }
    if (strcmp(a, "--check") == 0) {
        call->check = KJIT_CHECK_VALUES;
        return 1;
    }
    if (strncmp(a, "--check=", 8) == 0) {
        const char *kind = a + 8;
        if (strcmp(kind, "values") == 0)
            call->check = KJIT_CHECK_VALUES;
        else if (strcmp(kind, "race") == 0)
            call->check = KJIT_CHECK_RACE;
        else if (strcmp(kind, "all") == 0)
            call->check = KJIT_CHECK_ALL;
        else {
            snprintf(why, why_size, "--check= takes values, race or all, not '%s'", kind);
            return -1;
        }
        return 1;
    }
    if (KJ_CLI_OPTION_AT(*i, "--axis") || KJ_CLI_OPTION_AT(*i, "--init")) {
        const char *message = NULL;
        const char *name = strncmp(a, "--axis", 6) == 0 ? "--axis" : "--init";
        if (!kj_cli_reduce_option(name, value, &call->reduce, &message)) {
            snprintf(why, why_size, "%s", message ? message : "a bad option");
            return -1;
        }
        return 1;
    }
    return 0;
}

bool kj_cli_call_complete(const KjCliCall *call, char *why, size_t why_size)
{
    if (!call->file || !call->function)
        snprintf(why, why_size, "needs a FILE and a FUNCTION");
    else if (call->has_grid != call->has_block)
        snprintf(why, why_size, "--grid and --block go together");
    else
        return true;
    return false;
}

bool kj_cli_same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

const char *kj_cli_output_clash(const char *output, const KjCliCall *call)
{
    struct stat target;
    if (stat(output, &target) != 0 || !S_ISREG(target.st_mode))
        return NULL; /* a new file, or /dev/stdout and the like */
    if (call->file && kj_cli_same_file(output, call->file))
        return call->file;
    for (int i = 0; i < call->arg_count; i++)
        if (kj_cli_ends_with(call->args[i], ".npy") && kj_cli_same_file(output, call->args[i]))
            return call->args[i];
    return NULL;
}

bool kj_cli_is_number(const char *text)
{
    char *end;
    strtod(text, &end);
    return end != text && *end == '\0';
}

/* ------------------------------------------------------------- generators */

static uint64_t rng_state = 1;

void kj_cli_seed(uint64_t seed)
{
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
    if (rng_state == 0)
        rng_state = 1;
}

static uint64_t rng_next(void)
{
    /* xorshift64*: fast, and the same stream on every machine. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

static double rng_uniform(void)
{
    return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0);
}

static double rng_normal(void)
{
    double u = rng_uniform(), v = rng_uniform();
    return sqrt(-2.0 * log(u > 0 ? u : 1e-300)) * cos(2.0 * M_PI * v);
}

static void store_value(void *at, kjit_dtype dtype, double re, double im)
{
    switch (dtype) {
    case KJIT_BOOL: *(uint8_t *)at = re != 0; break;
    case KJIT_I8: *(int8_t *)at = (int8_t)re; break;
    case KJIT_I16: *(int16_t *)at = (int16_t)re; break;
    case KJIT_I32: *(int32_t *)at = (int32_t)re; break;
    case KJIT_I64: *(int64_t *)at = (int64_t)re; break;
    case KJIT_U8: *(uint8_t *)at = (uint8_t)re; break;
    case KJIT_U16: *(uint16_t *)at = (uint16_t)re; break;
    case KJIT_U32: *(uint32_t *)at = (uint32_t)re; break;
    case KJIT_U64: *(uint64_t *)at = (uint64_t)re; break;
    case KJIT_F32: *(float *)at = (float)re; break;
    case KJIT_F64: *(double *)at = re; break;
    case KJIT_C64: ((float *)at)[0] = (float)re; ((float *)at)[1] = (float)im; break;
    case KJIT_C128: ((double *)at)[0] = re; ((double *)at)[1] = im; break;
    case KJIT_F16: case KJIT_BF16: *(uint16_t *)at = kjit_half_from_double(dtype, re); break;
    default: break;
    }
}

double kj_cli_load_value(const void *at, kjit_dtype dtype, double *im)
{
    *im = 0;
    switch (dtype) {
    case KJIT_BOOL: return *(const uint8_t *)at != 0;
    case KJIT_I8: return *(const int8_t *)at;
    case KJIT_I16: return *(const int16_t *)at;
    case KJIT_I32: return *(const int32_t *)at;
    case KJIT_I64: return (double)*(const int64_t *)at;
    case KJIT_U8: return *(const uint8_t *)at;
    case KJIT_U16: return *(const uint16_t *)at;
    case KJIT_U32: return *(const uint32_t *)at;
    case KJIT_U64: return (double)*(const uint64_t *)at;
    case KJIT_F32: return *(const float *)at;
    case KJIT_F64: return *(const double *)at;
    case KJIT_C64: *im = ((const float *)at)[1]; return ((const float *)at)[0];
    case KJIT_C128: *im = ((const double *)at)[1]; return ((const double *)at)[0];
    case KJIT_F16: case KJIT_BF16: return kjit_half_to_double(dtype, *(const uint16_t *)at);
    default: return 0;
    }
}

static bool parse_dtype(const char *text, size_t len, kjit_dtype *out)
{
    for (int t = 0; t < KJIT_DTYPE_COUNT; t++) {
        const char *name = kjit_dtype_name((kjit_dtype)t);
        if (strlen(name) == len && strncmp(text, name, len) == 0) {
            *out = (kjit_dtype)t;
            return true;
        }
    }
    return false;
}

/* "1000", "1e6", "300x200": extents separated by x. */
static bool parse_shape(const char *text, int *ndim, int64_t *shape)
{
    *ndim = 0;
    for (;;) {
        char *end;
        /* decimal only: strtod would read 0x10 as sixteen, where 0x10 is 0 by 10 */
        double v = text[0] == '0' && (text[1] == 'x' || text[1] == 'X') ? (end = (char *)text + 1, 0)
                                                                          : strtod(text, &end);
        if (end == text || v < 0 || v != floor(v) || v > 1e15 || *ndim == KJIT_MAX_DIMS)
            return false;
        shape[(*ndim)++] = (int64_t)v;
        if (*end == '\0')
            return true;
        if (*end != 'x')
            return false;
        text = end + 1;
    }
}

static const char *const generator_names[] = {"zeros", "ones", "rand", "randn", "arange"};

/* The generator kind (an index into generator_names) of "NAME:...", or -1. */
static int generator_kind(const char *text)
{
    const char *colon = strchr(text, ':');
    if (!colon)
        return -1;
    for (int k = 0; k < 5; k++)
        if ((size_t)(colon - text) == strlen(generator_names[k]) &&
            strncmp(text, generator_names[k], strlen(generator_names[k])) == 0)
            return k;
    return -1;
}

/* zeros|ones|rand|randn|arange:[DTYPE:]SHAPE.  1: not a generator, 2: bad. */
static int make_generated(const char *text, bool have_param, kjit_dtype param_dtype,
                          kjit_array *out, char **why)
{
    int kind = generator_kind(text);
    if (kind < 0)
        return 1;
    const char *rest = strchr(text, ':') + 1;
    const char *second = strchr(rest, ':');
    kjit_dtype dtype = param_dtype;
    if (second) {
        if (!parse_dtype(rest, (size_t)(second - rest), &dtype)) {
            *why = kj_cli_xstrdup("unknown element type in the generator");
            return 2;
        }
        rest = second + 1;
    } else if (!have_param) {
        *why = kj_cli_xstrdup("the generator needs a DTYPE here (NAME:DTYPE:SHAPE)");
        return 2;
    }
    int ndim;
    int64_t shape[KJIT_MAX_DIMS];
    if (!parse_shape(rest, &ndim, shape)) {
        *why = kj_cli_xstrdup("bad SHAPE in the generator (1000, 1e6 or 300x200)");
        return 2;
    }
    /* The size through the library's one overflow-checked computation:
     * 3037000500x3037000500 f32 is no array, not a small one. */
    int64_t size, bytes;
    if (kjit_shape_size(dtype, ndim, shape, &size, &bytes, why) != KJIT_OK)
        return 2;
    size_t elem = kjit_dtype_size(dtype);
    void *data = NULL;
    if (posix_memalign(&data, 64, (size_t)bytes + 64) != 0) {
        KjCliBuf buf = {0};
        kj_cli_printf(&buf, "out of memory for the generated array (%lld bytes)", (long long)bytes);
        *why = buf.data;
        return 2;
    }
    *out = kjit_array_make(NULL, dtype, ndim, shape);
    out->data = data;
    bool integer = dtype != KJIT_F32 && dtype != KJIT_F64 && dtype != KJIT_C64 &&
                   dtype != KJIT_C128 && dtype != KJIT_F16 && dtype != KJIT_BF16;
    for (int64_t i = 0; i < size; i++) {
        double re = 0, im = 0;
        switch (kind) {
        case 0: break;
        case 1: re = 1; break;
        case 2:
            if (dtype == KJIT_BOOL) re = rng_next() >> 63;
            else if (integer) re = (double)(rng_next() % 100);
            else re = rng_uniform(), im = rng_uniform();
            break;
        case 3: re = rng_normal(), im = rng_normal(); break;
        case 4: re = (double)i; break;
        }
        store_value((char *)data + i * (int64_t)elem, dtype, re, im);
    }
    return 0;
}

char *kj_cli_resize_generator(const char *text, int64_t size)
{
    if (generator_kind(text) < 0)
        return NULL;
    const char *shape_text = strrchr(text, ':') + 1;
    int ndim;
    int64_t shape[KJIT_MAX_DIMS];
    if (!parse_shape(shape_text, &ndim, shape))
        return NULL;
    /* Extents of 1 are there for broadcasting and stay; the others share the
     * new size in their old proportions. */
    double old_size = 1;
    int scaled = 0;
    for (int d = 0; d < ndim; d++)
        if (shape[d] > 1) {
            old_size *= (double)shape[d];
            scaled++;
        }
    if (scaled == 0)
        return NULL;
    double factor = pow((double)size / old_size, 1.0 / scaled);
    KjCliBuf buf = {0};
    kj_cli_printf(&buf, "%.*s", (int)(shape_text - text), text);
    for (int d = 0; d < ndim; d++) {
        int64_t extent = shape[d];
        if (extent > 1) {
            extent = scaled == 1 ? size : (int64_t)llround((double)extent * factor);
            extent = extent < 1 ? 1 : extent;
        }
        kj_cli_printf(&buf, "%s%lld", d ? "x" : "", (long long)extent);
    }
    return buf.data;
}

/* ------------------------------------------------------------ arguments */

static bool dtype_is_integer(kjit_dtype d) { return d >= KJIT_I8 && d <= KJIT_U64; }
static bool dtype_is_signed(kjit_dtype d) { return d >= KJIT_I8 && d <= KJIT_I64; }

/* An integer literal: [+-] then decimal digits, or 0x and hex digits.  The
 * magnitude, exactly, in *magnitude; false when it is not one, or past 2^64-1. */
static bool parse_integer_text(const char *text, bool *negative, uint64_t *magnitude,
                               bool *too_large)
{
    const char *s = text;
    *negative = false;
    *too_large = false;
    if (*s == '+' || *s == '-')
        *negative = *s++ == '-';
    unsigned base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    if (*s == '\0')
        return false;
    uint64_t value = 0;
    for (; *s; s++) {
        unsigned digit;
        if (*s >= '0' && *s <= '9') digit = (unsigned)(*s - '0');
        else if (base == 16 && *s >= 'a' && *s <= 'f') digit = (unsigned)(*s - 'a' + 10);
        else if (base == 16 && *s >= 'A' && *s <= 'F') digit = (unsigned)(*s - 'A' + 10);
        else return false;
        if (value > (UINT64_MAX - digit) / base)
            *too_large = true;
        value = value * base + digit;
    }
    *magnitude = value;
    return true;
}

/* The range of an integer dtype, as text for messages. */
static void integer_range(kjit_dtype dtype, int64_t *low, uint64_t *high)
{
    int bits = (int)kjit_dtype_size(dtype) * 8;
    if (dtype_is_signed(dtype)) {
        *low = bits == 64 ? INT64_MIN : -((int64_t)1 << (bits - 1));
        *high = ((uint64_t)1 << (bits - 1)) - 1;
    } else {
        *low = 0;
        *high = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
    }
}

static char *range_message(const char *text, kjit_dtype dtype)
{
    int64_t low;
    uint64_t high;
    integer_range(dtype, &low, &high);
    KjCliBuf buf = {0};
    kj_cli_printf(&buf, "%s does not fit %s (%lld to %llu)", text, kjit_dtype_name(dtype),
                  (long long)low, (unsigned long long)high);
    return buf.data;
}

/*
 * A number from the command line as a scalar of `dtype`, exactly: integers of
 * any size parse without a detour through double and must fit the type
 * (`300` is no u8, `-1` no u64); a float text given to an integer type must
 * be a whole number in range (`1e6`); floats parse straight to f32 or f64
 * (strtof: one rounding) and must not overflow the type (`1e39` is no f32,
 * `70000` no f16; `inf` is any float); complex types take the number as the
 * real part.
 * False with *why (heap) otherwise.
 */
bool kj_cli_parse_number(const char *text, kjit_dtype dtype, kjit_arg *out, char **why)
{
    memset(out, 0, sizeof *out);
    out->kind = KJIT_ARG_SCALAR;
    out->dtype = dtype;
    bool negative, too_large;
    uint64_t magnitude = 0;
    bool integer = parse_integer_text(text, &negative, &magnitude, &too_large);
    if (dtype == KJIT_BOOL) {
        if (integer && !too_large && magnitude <= 1) {
            out->value.i = (int64_t)magnitude;
            return true;
        }
        *why = kj_cli_xstrdup("a bool argument is true, false, 0 or 1");
        return false;
    }
    if (dtype_is_integer(dtype)) {
        if (!integer) {
            /* 1e6 or 2.0: a whole number written as a float */
            char *end;
            double v = strtod(text, &end);
            if (*end != '\0' || v != floor(v) || !isfinite(v)) {
                KjCliBuf buf = {0};
                kj_cli_printf(&buf, "%s is not a whole number, and the parameter is %s", text,
                              kjit_dtype_name(dtype));
                *why = buf.data;
                return false;
            }
            negative = v < 0;
            too_large = fabs(v) >= 18446744073709551616.0;
            magnitude = too_large ? 0 : (uint64_t)fabs(v);
        }
        int64_t low;
        uint64_t high;
        integer_range(dtype, &low, &high);
        /* -|low| as a magnitude: 2^63 for i64, without signed overflow */
        uint64_t low_magnitude = (uint64_t)(-(low + 1)) + 1;
        bool fits = !too_large && (negative ? (low < 0 && magnitude <= low_magnitude) || magnitude == 0
                                            : magnitude <= high);
        if (!fits) {
            *why = range_message(text, dtype);
            return false;
        }
        if (dtype_is_signed(dtype))
            out->value.i = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
        else
            out->value.u = magnitude;
        return true;
    }
    char *end;
    double v = dtype == KJIT_F32 || dtype == KJIT_C64 ? (double)strtof(text, &end) : strtod(text, &end);
    if (*end != '\0') {
        KjCliBuf buf = {0};
        kj_cli_printf(&buf, "%s is not a number", text);
        *why = buf.data;
        return false;
    }
    /* A finite number past the type's largest becomes an infinity when
     * rounded: that is not the number typed ("inf" itself is). */
    bool half = dtype == KJIT_F16 || dtype == KJIT_BF16;
    double rounded = half ? kjit_half_to_double(dtype, kjit_half_from_double(dtype, v)) : v;
    if (isinf(rounded) && !strpbrk(text, "iI")) {
        double largest = dtype == KJIT_F32 || dtype == KJIT_C64 ? (double)FLT_MAX
                         : half ? kjit_half_to_double(dtype, dtype == KJIT_F16 ? 0x7bff : 0x7f7f)
                                : DBL_MAX;
        KjCliBuf buf = {0};
        kj_cli_printf(&buf, "%s does not fit %s (its largest finite value is %.8g)", text,
                      kjit_dtype_name(dtype), largest);
        *why = buf.data;
        return false;
    }
    if (dtype == KJIT_C64 || dtype == KJIT_C128) {
        out->value.c[0] = v;
        out->value.c[1] = 0;
    } else {
        out->value.f = v;
    }
    return true;
}

/* A number when the parameter's type is not known yet (a function with
 * several signatures): an integer is i64, or u64 past the largest i64; a
 * float is f64.  kj_cli_make_args parses it again, exactly, for the
 * signature the call matches. */
static bool parse_number_generic(const char *text, kjit_arg *out, char **why)
{
    bool negative, too_large;
    uint64_t magnitude;
    if (!parse_integer_text(text, &negative, &magnitude, &too_large))
        return kj_cli_parse_number(text, KJIT_F64, out, why);
    if (!negative && !too_large && magnitude > (uint64_t)INT64_MAX)
        return kj_cli_parse_number(text, KJIT_U64, out, why);
    if (too_large || (negative && magnitude > (uint64_t)INT64_MAX + 1)) {
        KjCliBuf buf = {0};
        kj_cli_printf(&buf, "%s is outside the 64-bit integers", text);
        *why = buf.data;
        return false;
    }
    return kj_cli_parse_number(text, KJIT_I64, out, why);
}

int kj_cli_make_args(const char *command, kjit_function *function, const char *const *texts,
                     int count, KjCliArgs *out)
{
    memset(out, 0, sizeof *out);
    out->count = count;
    bool one_signature = kjit_function_signature_count(function) == 1;
    for (int i = 0; i < count; i++) {
        const char *text = texts[i];
        kjit_arg *arg = &out->args[i];
        kjit_array *array = &out->arrays[i];
        kjit_dtype param_dtype = KJIT_F64;
        int param_ndim = 0;
        bool have_param = one_signature &&
                          kjit_function_param(function, 0, i, &param_dtype, &param_ndim) == KJIT_OK;
        char *why = NULL;
        if (kj_cli_ends_with(text, ".npy")) {
            kjit_status status = kjit_npy_read(text, array, &why);
            if (status != KJIT_OK) {
                fprintf(stderr, "kjit %s: argument %d: %s\n", command, i, why);
                free(why);
                return status == KJIT_ERROR_IO ? 2 : 1;
            }
            out->owned[i] = true;
            *arg = kjit_arg_array(array);
        } else if (strcmp(text, "true") == 0 || strcmp(text, "false") == 0) {
            *arg = kjit_arg_i64(text[0] == 't');
            arg->dtype = KJIT_BOOL;
        } else if (kj_cli_is_number(text)) {
            bool exact = have_param && param_ndim == 0;
            if (!(exact ? kj_cli_parse_number(text, param_dtype, arg, &why)
                        : parse_number_generic(text, arg, &why))) {
                fprintf(stderr, "kjit %s: argument %d: %s\n", command, i, why);
                free(why);
                return 2;
            }
        } else {
            int made = make_generated(text, have_param, param_dtype, array, &why);
            if (made == 1) {
                fprintf(stderr, "kjit %s: argument %d '%s' is not a .npy file, a number, "
                                "true/false or a generator\n", command, i, text);
                return 2;
            }
            if (made == 2) {
                fprintf(stderr, "kjit %s: argument %d '%s': %s\n", command, i, text, why);
                free(why);
                return 2;
            }
            out->owned[i] = true;
            *arg = kjit_arg_array(array);
        }
    }
    /* Numbers again, exactly as the parameters of the signature the call
     * takes: a value that does not fit its parameter is an error, never
     * wrapped or clamped.  With no signature matching, the call says why. */
    int signature = 0;
    if (one_signature || kjit_function_match(function, out->args, count, &signature) != KJIT_OK)
        return 0;
    for (int i = 0; i < count; i++) {
        kjit_dtype dtype;
        int ndim;
        if (!kj_cli_is_number(texts[i]) ||
            kjit_function_param(function, signature, i, &dtype, &ndim) != KJIT_OK || ndim != 0)
            continue;
        char *why = NULL;
        if (!kj_cli_parse_number(texts[i], dtype, &out->args[i], &why)) {
            fprintf(stderr, "kjit %s: argument %d: %s, in the signature %s that the call takes\n",
                    command, i, why, kjit_function_signature(function, signature));
            free(why);
            return 2;
        }
    }
    return 0;
}

void kj_cli_args_free(KjCliArgs *args)
{
    for (int i = 0; i < args->count; i++)
        if (args->owned[i])
            kjit_array_free(&args->arrays[i]);
    args->count = 0;
}

kjit_status kj_cli_load_module(kjit_context *context, const char *path, kjit_module **out)
{
    size_t len = strlen(path);
    if (len > 3 && strcmp(path + len - 3, ".so") == 0)
        return kjit_module_load_library(context, path, out);
    return kjit_compile_file(context, path, out);
}
