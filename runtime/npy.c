/*
 * npy.c: NumPy's .npy files, read and written, so `kjit run` and host
 * programs can exchange arrays with Python.
 *
 * Read: format versions 1.0, 2.0 and 3.0, little-endian (or byte-order-free)
 * plain dtypes, C order, and Fortran order through strides (the data is kept
 * as it lies on disk).  Big-endian data, structured and object dtypes, a
 * header dict with other keys or a key twice, a shape whose size overflows,
 * and files shorter than their header says (checked before anything is
 * allocated) are errors that name the file.
 * Write: format 1.0, C order, from any view (strided views are gathered),
 * whole or not at all (kj_output_open).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kjit_runtime.h"

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

static char *npy_error(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *npy_error(const char *path, const char *fmt, ...)
{
    KjBuf buf = {0};
    kj_buf_printf(&buf, "%s: ", path);
    va_list ap;
    va_start(ap, fmt);
    kj_buf_vprintf(&buf, fmt, ap);
    va_end(ap);
    return buf.data;
}

/* NumPy's type codes for our dtypes, without the byte-order character.  NumPy
 * has no bf16: ml_dtypes' bfloat16 arrays are saved as '<V2' (two raw bytes),
 * so kjit reads every V2 array as bf16 and writes bf16 as '<V2', which
 * np.load gives back as void and .view(ml_dtypes.bfloat16) (or
 * .view(np.uint16), the raw bits) turns into numbers. */
static const char *const npy_codes[KJIT_DTYPE_COUNT] = {
    "b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8", "c8", "c16", "f2", "V2",
};

/*
 * The header's dict, read as np.load reads it: exactly the keys 'descr',
 * 'fortran_order' and 'shape', each once (a repeated key, which Python's
 * dict would settle by keeping the last, is refused rather than guessed at).
 * Each value is kept as a pointer to its first character.
 */
enum { KEY_DESCR, KEY_FORTRAN_ORDER, KEY_SHAPE, KEY_COUNT };
static const char *const header_keys[KEY_COUNT] = {"descr", "fortran_order", "shape"};

static const char *skip_spaces(const char *at)
{
    while (*at == ' ' || *at == '\t' || *at == '\n' || *at == '\r')
        at++;
    return at;
}

/* Past one Python literal: a string, a bracketed group (nesting, with
 * strings inside), or a bare word or number; NULL when it does not end. */
static const char *skip_value(const char *at)
{
    int depth = 0;
    do {
        char c = *at;
        if (c == '\'' || c == '"') {
            const char *close = strchr(at + 1, c);
            if (!close)
                return NULL;
            at = close + 1;
        } else if (c == '(' || c == '[' || c == '{') {
            depth++;
            at++;
        } else if (c == ')' || c == ']' || c == '}') {
            if (depth == 0)
                return at; /* the dict's own brace */
            depth--;
            at++;
        } else if (c == '\0') {
            return NULL;
        } else if (depth == 0 && c == ',') {
            return at;
        } else {
            at++;
        }
    } while (depth > 0 || (*at != ',' && *at != '}' && *at != '\0'));
    return at;
}

static kjit_status parse_header_dict(const char *path, const char *header,
                                     const char *values[KEY_COUNT], char **error)
{
    for (int k = 0; k < KEY_COUNT; k++)
        values[k] = NULL;
    const char *at = skip_spaces(header);
    if (*at++ != '{') {
        *error = npy_error(path, "the header is not a dict");
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    for (;;) {
        at = skip_spaces(at);
        if (*at == '}')
            break;
        char quote = *at;
        const char *close = quote == '\'' || quote == '"' ? strchr(at + 1, quote) : NULL;
        if (!close) {
            *error = npy_error(path, "unreadable header dict");
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
        const char *key = at + 1;
        int length = (int)(close - key);
        int k = 0;
        while (k < KEY_COUNT && !(strlen(header_keys[k]) == (size_t)length &&
                                  strncmp(key, header_keys[k], (size_t)length) == 0))
            k++;
        if (k == KEY_COUNT) {
            *error = npy_error(path, "the header has the key '%.*s' (a .npy header has "
                                     "'descr', 'fortran_order' and 'shape' only)",
                               length > 64 ? 64 : length, key);
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
        if (values[k]) {
            *error = npy_error(path, "the header gives '%s' twice", header_keys[k]);
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
        at = skip_spaces(close + 1);
        if (*at++ != ':') {
            *error = npy_error(path, "unreadable header dict");
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
        values[k] = at = skip_spaces(at);
        at = skip_value(at);
        if (!at) {
            *error = npy_error(path, "unreadable value of '%s' in the header", header_keys[k]);
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
        at = skip_spaces(at);
        if (*at == ',')
            at++;
        else if (*at != '}') {
            *error = npy_error(path, "unreadable header dict");
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
    }
    for (int k = 0; k < KEY_COUNT; k++)
        if (!values[k]) {
            *error = npy_error(path, "the header has no '%s'", header_keys[k]);
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
    return KJIT_OK;
}

/* 'fortran_order': True or False, nothing else. */
static kjit_status parse_order(const char *path, const char *value, bool *fortran, char **error)
{
    for (int truth = 0; truth < 2; truth++) {
        const char *word = truth ? "True" : "False";
        size_t n = strlen(word);
        if (strncmp(value, word, n) == 0) {
            const char *after = skip_spaces(value + n);
            if (*after == ',' || *after == '}') {
                *fortran = truth;
                return KJIT_OK;
            }
        }
    }
    *error = npy_error(path, "the header's 'fortran_order' is neither True nor False");
    return KJIT_ERROR_INVALID_ARGUMENT;
}

static kjit_status parse_descr(const char *path, const char *value, kjit_dtype *dtype,
                               char **error)
{
    if (*value != '\'' && *value != '"') {
        *error = npy_error(path, "the header's 'descr' is not a plain type (structured "
                                 "dtypes are not supported)");
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    char quote = *value++;
    const char *end = strchr(value, quote);
    if (!end || end - value < 2 || end - value > 8) {
        *error = npy_error(path, "unreadable 'descr' in the header");
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    char order = value[0];
    char code[8] = {0};
    memcpy(code, value + 1, (size_t)(end - value - 1));
    if (order == '>' && strcmp(code, "b1") && strcmp(code, "i1") && strcmp(code, "u1")) {
        *error = npy_error(path, "big-endian data ('%.*s') is not supported; save it "
                                 "little-endian (arr.astype(arr.dtype.newbyteorder('<')))",
                           (int)(end - value), value);
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    if (order != '<' && order != '|' && order != '>' && order != '=') {
        *error = npy_error(path, "unreadable 'descr' '%.*s'", (int)(end - value), value);
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    for (int t = 0; t < KJIT_DTYPE_COUNT; t++)
        if (strcmp(code, npy_codes[t]) == 0) {
            *dtype = (kjit_dtype)t;
            return KJIT_OK;
        }
    *error = npy_error(path, "dtype '%.*s' has no kjit element type%s", (int)(end - value),
                       value, code[0] == 'O' ? " (object arrays cannot be read)" : "");
    return KJIT_ERROR_TYPE;
}

static kjit_status parse_shape(const char *path, const char *value, int *ndim, int64_t *shape,
                               char **error)
{
    if (*value != '(') {
        *error = npy_error(path, "the header's 'shape' is not a tuple");
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    value++;
    int n = 0;
    for (;;) {
        while (*value == ' ' || *value == ',')
            value++;
        if (*value == ')')
            break;
        char *end;
        errno = 0;
        long long extent = strtoll(value, &end, 10);
        if (end == value || extent < 0 || errno) {
            *error = npy_error(path, "unreadable 'shape' in the header");
            return KJIT_ERROR_INVALID_ARGUMENT;
        }
        if (n == KJIT_MAX_DIMS) {
            *error = npy_error(path, "more than %d dimensions", KJIT_MAX_DIMS);
            return KJIT_ERROR_SHAPE;
        }
        shape[n++] = extent;
        value = end;
        while (*value == 'L')
            value++;
    }
    *ndim = n;
    return KJIT_OK;
}

kjit_status kj_npy_read(const char *path, kjit_array *out, char **error)
{
    memset(out, 0, sizeof *out);
    FILE *file = fopen(path, "rb");
    if (!file) {
        *error = npy_error(path, "cannot open: %s", strerror(errno));
        return KJIT_ERROR_IO;
    }
    kjit_status status = KJIT_ERROR_INVALID_ARGUMENT;
    char *header = NULL;
    void *data = NULL;
    unsigned char preamble[12];
    if (fread(preamble, 1, 8, file) != 8 || memcmp(preamble, npy_magic, 6) != 0) {
        *error = npy_error(path, "not a .npy file (no \\x93NUMPY magic)");
        goto done;
    }
    int major = preamble[6];
    size_t header_len;
    if (major == 1) {
        if (fread(preamble + 8, 1, 2, file) != 2)
            goto truncated;
        header_len = preamble[8] | (size_t)preamble[9] << 8;
    } else if (major == 2 || major == 3) {
        if (fread(preamble + 8, 1, 4, file) != 4)
            goto truncated;
        header_len = preamble[8] | (size_t)preamble[9] << 8 | (size_t)preamble[10] << 16 |
                     (size_t)preamble[11] << 24;
    } else {
        *error = npy_error(path, ".npy format version %d.%d is not supported (1.0 to 3.0 are)",
                           major, preamble[7]);
        goto done;
    }
    if (header_len > (1u << 24)) {
        *error = npy_error(path, "the header claims %zu bytes", header_len);
        goto done;
    }
    header = kj_xmalloc(header_len + 1);
    if (fread(header, 1, header_len, file) != header_len)
        goto truncated;
    header[header_len] = '\0';

    const char *values[KEY_COUNT];
    kjit_dtype dtype;
    int ndim;
    int64_t shape[KJIT_MAX_DIMS];
    bool fortran;
    status = parse_header_dict(path, header, values, error);
    if (status == KJIT_OK)
        status = parse_descr(path, values[KEY_DESCR], &dtype, error);
    if (status == KJIT_OK)
        status = parse_shape(path, values[KEY_SHAPE], &ndim, shape, error);
    if (status == KJIT_OK)
        status = parse_order(path, values[KEY_FORTRAN_ORDER], &fortran, error);
    if (status != KJIT_OK)
        goto done;

    /* What the header claims, checked against what the file holds before
     * any of it is allocated: a 100-byte file cannot ask for 40 GB. */
    int64_t bytes;
    char *why = NULL;
    status = kj_shape_size(dtype, ndim, shape, NULL, &bytes, &why);
    if (status != KJIT_OK) {
        *error = npy_error(path, "%s", why);
        free(why);
        goto done;
    }
    struct stat info;
    long offset = ftell(file);
    if (fstat(fileno(file), &info) == 0 && S_ISREG(info.st_mode) && offset >= 0 &&
        info.st_size - offset < bytes) {
        *error = npy_error(path, "truncated: the header claims %lld bytes of data, the file "
                                 "holds %lld",
                           (long long)bytes, (long long)(info.st_size - offset));
        status = KJIT_ERROR_INVALID_ARGUMENT;
        goto done;
    }
    if (posix_memalign(&data, 64, bytes ? (size_t)bytes : 64) != 0) {
        data = NULL;
        *error = npy_error(path, "out of memory for %lld bytes", (long long)bytes);
        status = KJIT_ERROR_OUT_OF_MEMORY;
        goto done;
    }
    if (fread(data, 1, (size_t)bytes, file) != (size_t)bytes) {
        status = KJIT_ERROR_INVALID_ARGUMENT;
        goto truncated;
    }
    *out = kjit_array_make(data, dtype, ndim, shape);
    /* An empty array's strides address nothing, and the product of its other
     * extents may not fit (found by tests/fuzz/fuzz_npy.c); a non-empty one's
     * partial products are at most its byte size. */
    if (fortran && bytes > 0) {
        /* NumPy's Fortran order: the first index fastest, the data as it lies */
        int64_t stride = (int64_t)kjit_dtype_size(dtype);
        for (int d = 0; d < ndim; d++) {
            out->strides[d] = stride;
            stride *= shape[d] > 0 ? shape[d] : 1; /* fits: kj_shape_size said so */
        }
    }
    data = NULL;
    status = KJIT_OK;
    goto done;

truncated:
    *error = npy_error(path, "the file is truncated");
    status = KJIT_ERROR_INVALID_ARGUMENT;
done:
    free(header);
    free(data);
    if (status != KJIT_OK)
        memset(out, 0, sizeof *out);
    fclose(file);
    return status;
}

void kj_array_gather(const kjit_array *array, void *dst)
{
    size_t elem = kjit_dtype_size(array->dtype);
    int64_t count = kjit_array_size(array);
    if (kj_array_is_contiguous(array)) {
        memcpy(dst, array->data, (size_t)count * elem);
        return;
    }
    int64_t index[KJIT_MAX_DIMS] = {0};
    char *to = dst;
    for (int64_t n = 0; n < count; n++) {
        const char *from = array->data;
        for (int d = 0; d < array->ndim; d++)
            from += index[d] * array->strides[d];
        memcpy(to, from, elem);
        to += elem;
        for (int d = array->ndim - 1; d >= 0; d--) {
            if (++index[d] < array->shape[d])
                break;
            index[d] = 0;
        }
    }
}

kjit_status kj_npy_write(const char *path, const kjit_array *array, char **error)
{
    int64_t bytes;
    char *why = NULL;
    kjit_status status = kj_array_check(array, &why);
    if (status != KJIT_OK) {
        *error = npy_error(path, "%s", why);
        free(why);
        return status;
    }
    if (!array->data && kjit_array_size(array) > 0) {
        *error = npy_error(path, "the array to write has no data");
        return KJIT_ERROR_INVALID_ARGUMENT;
    }
    kj_shape_size(array->dtype, array->ndim, array->shape, NULL, &bytes, NULL);
    char dict[512];
    int len = snprintf(dict, sizeof dict, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                       kjit_dtype_size(array->dtype) == 1 ? '|' : '<', npy_codes[array->dtype]);
    for (int d = 0; d < array->ndim; d++)
        len += snprintf(dict + len, sizeof dict - (size_t)len, "%lld,%s",
                        (long long)array->shape[d], d + 1 < array->ndim ? " " : "");
    if (array->ndim > 1)
        len--; /* NumPy writes (3, 4) but (3,) */
    len += snprintf(dict + len, sizeof dict - (size_t)len, "), }");
    /* Pad with spaces and end with a newline so the data starts 64-byte aligned. */
    size_t total = 10 + (size_t)len + 1;
    size_t padded = (total + 63) / 64 * 64;
    size_t header_len = padded - 10;

    void *gathered = NULL;
    const void *data = array->data;
    if (!kj_array_is_contiguous(array)) {
        gathered = malloc(bytes ? (size_t)bytes : 1);
        if (!gathered) {
            *error = npy_error(path, "out of memory for %lld bytes", (long long)bytes);
            return KJIT_ERROR_OUT_OF_MEMORY;
        }
        kj_array_gather(array, gathered);
        data = gathered;
    }
    /* Whole or not at all: the previous file stays until the new one is on disk. */
    KjOutputFile output;
    status = kj_output_open(path, &output, error);
    if (status != KJIT_OK) {
        free(gathered);
        return status;
    }
    FILE *file = output.file;
    unsigned char preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                  (unsigned char)(header_len & 0xff),
                                  (unsigned char)(header_len >> 8)};
    bool ok = fwrite(preamble, 1, 10, file) == 10 && fwrite(dict, 1, (size_t)len, file) == (size_t)len;
    for (size_t i = 10 + (size_t)len; ok && i < padded - 1; i++)
        ok = fputc(' ', file) != EOF;
    ok = ok && fputc('\n', file) != EOF;
    ok = ok && (bytes == 0 || fwrite(data, 1, (size_t)bytes, file) == (size_t)bytes);
    int write_errno = errno;
    free(gathered);
    if (!ok) {
        kj_output_close(&output, false, NULL);
        *error = npy_error(path, "write failed: %s", strerror(write_errno));
        return KJIT_ERROR_IO;
    }
    return kj_output_close(&output, true, error);
}
