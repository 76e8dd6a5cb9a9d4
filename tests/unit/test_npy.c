/*
 * test_npy.c: .npy reading and writing (runtime/npy.c): round trips of every
 * element type and of strided views, Fortran order, format 2.0 headers, the
 * errors for big-endian, object and truncated files, header dicts and sizes
 * np.load would refuse, and files replaced whole.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kjit_runtime.h"

static char temp_dir[64];

static void make_temp_dir(void)
{
    strcpy(temp_dir, "/tmp/kjit-npy-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(temp_dir));
}

static void remove_temp_dir(void)
{
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", temp_dir);
    ck_assert_int_eq(system(command), 0);
}

static const char *temp_path(const char *name)
{
    static char path[160];
    snprintf(path, sizeof path, "%s/%s", temp_dir, name);
    return path;
}

static uint64_t state = 0x12345678abcdefULL;
static uint64_t next_random(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static void write_bytes(const char *path, const void *bytes, size_t size)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, size, f), size);
    fclose(f);
}

/* A .npy file with the given header dict and payload (format 1.0 or 2.0). */
static void write_npy_raw(const char *path, int major, const char *dict, const void *data,
                          size_t size)
{
    unsigned char buf[4096];
    size_t prefix = major == 1 ? 10 : 12;
    size_t len = strlen(dict);
    size_t total = (prefix + len + 1 + 63) / 64 * 64;
    size_t header = total - prefix;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    buf[8] = header & 0xff;
    buf[9] = (header >> 8) & 0xff;
    if (major != 1) {
        buf[10] = 0;
        buf[11] = 0;
    }
    memcpy(buf + prefix, dict, len);
    memset(buf + prefix + len, ' ', total - prefix - len - 1);
    buf[total - 1] = '\n';
    memcpy(buf + total, data, size);
    write_bytes(path, buf, total + size);
}

START_TEST(round_trip_every_dtype)
{
    make_temp_dir();
    for (int t = 0; t < KJIT_DTYPE_COUNT; t++) {
        int64_t shape[3] = {3, 5, 7};
        size_t bytes = 3 * 5 * 7 * kjit_dtype_size((kjit_dtype)t);
        unsigned char *data = malloc(bytes);
        for (size_t i = 0; i < bytes; i++)
            data[i] = (unsigned char)next_random();
        if (t == KJIT_BOOL)
            for (size_t i = 0; i < bytes; i++)
                data[i] &= 1;
        kjit_array a = kjit_array_make(data, (kjit_dtype)t, 3, shape);
        char *error = NULL;
        ck_assert_int_eq(kj_npy_write(temp_path("a.npy"), &a, &error), KJIT_OK);
        kjit_array b;
        ck_assert_int_eq(kj_npy_read(temp_path("a.npy"), &b, &error), KJIT_OK);
        ck_assert_int_eq(b.dtype, t);
        ck_assert_int_eq(b.ndim, 3);
        for (int d = 0; d < 3; d++) {
            ck_assert_int_eq(b.shape[d], shape[d]);
            ck_assert_int_eq(b.strides[d], a.strides[d]);
        }
        ck_assert_int_eq(memcmp(b.data, data, bytes), 0);
        kjit_array_free(&b);
        free(data);
    }
    remove_temp_dir();
}
END_TEST

START_TEST(scalar_and_empty_arrays)
{
    make_temp_dir();
    double value = 2.5;
    kjit_array s = kjit_array_make(&value, KJIT_F64, 0, NULL);
    char *error = NULL;
    ck_assert_int_eq(kj_npy_write(temp_path("s.npy"), &s, &error), KJIT_OK);
    kjit_array r;
    ck_assert_int_eq(kj_npy_read(temp_path("s.npy"), &r, &error), KJIT_OK);
    ck_assert_int_eq(r.ndim, 0);
    ck_assert(*(double *)r.data == 2.5);
    kjit_array_free(&r);

    int64_t shape[2] = {0, 4};
    kjit_array e = kjit_array_make(NULL, KJIT_F32, 2, shape);
    ck_assert_int_eq(kj_npy_write(temp_path("e.npy"), &e, &error), KJIT_OK);
    ck_assert_int_eq(kj_npy_read(temp_path("e.npy"), &r, &error), KJIT_OK);
    ck_assert_int_eq(r.ndim, 2);
    ck_assert_int_eq(r.shape[0], 0);
    ck_assert_int_eq(r.shape[1], 4);
    kjit_array_free(&r);
    remove_temp_dir();
}
END_TEST

/* A transposed, sliced view is written in C order of the view. */
START_TEST(strided_view_is_gathered)
{
    make_temp_dir();
    double base[6][8];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 8; j++)
            base[i][j] = (double)(next_random() % 1000) / 7.0;
    /* view = base[1:5, ::2].T : shape (4, 4) */
    kjit_array v = {.data = &base[1][0], .dtype = KJIT_F64, .ndim = 2};
    v.shape[0] = 4;
    v.shape[1] = 4;
    v.strides[0] = 2 * sizeof(double);
    v.strides[1] = 8 * sizeof(double);
    char *error = NULL;
    ck_assert_int_eq(kj_npy_write(temp_path("v.npy"), &v, &error), KJIT_OK);
    kjit_array r;
    ck_assert_int_eq(kj_npy_read(temp_path("v.npy"), &r, &error), KJIT_OK);
    const double *got = r.data;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            ck_assert(got[i * 4 + j] == base[1 + j][2 * i]);
    kjit_array_free(&r);
    remove_temp_dir();
}
END_TEST

START_TEST(fortran_order_and_version_2)
{
    make_temp_dir();
    /* a 2x3 int32 array [[0,1,2],[3,4,5]] stored column by column */
    int32_t column_major[6] = {0, 3, 1, 4, 2, 5};
    write_npy_raw(temp_path("f.npy"), 2,
                  "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }", column_major,
                  sizeof column_major);
    kjit_array r;
    char *error = NULL;
    ck_assert_int_eq(kj_npy_read(temp_path("f.npy"), &r, &error), KJIT_OK);
    ck_assert_int_eq(r.dtype, KJIT_I32);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            const int32_t *at = (const int32_t *)((char *)r.data + i * r.strides[0] + j * r.strides[1]);
            ck_assert_int_eq(*at, i * 3 + j);
        }
    kjit_array_free(&r);
    remove_temp_dir();
}
END_TEST

START_TEST(errors_name_the_problem)
{
    make_temp_dir();
    double data[4] = {1, 2, 3, 4};
    kjit_array r;
    char *error = NULL;

    write_npy_raw(temp_path("be.npy"), 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (4,), }",
                  data, sizeof data);
    ck_assert_int_ne(kj_npy_read(temp_path("be.npy"), &r, &error), KJIT_OK);
    ck_assert_ptr_nonnull(strstr(error, "big-endian"));
    free(error);

    write_npy_raw(temp_path("obj.npy"), 1, "{'descr': '|O', 'fortran_order': False, 'shape': (4,), }",
                  data, sizeof data);
    ck_assert_int_ne(kj_npy_read(temp_path("obj.npy"), &r, &error), KJIT_OK);
    ck_assert_ptr_nonnull(strstr(error, "object"));
    free(error);

    write_npy_raw(temp_path("short.npy"), 1,
                  "{'descr': '<f8', 'fortran_order': False, 'shape': (40,), }", data, sizeof data);
    ck_assert_int_ne(kj_npy_read(temp_path("short.npy"), &r, &error), KJIT_OK);
    ck_assert_ptr_nonnull(strstr(error, "truncated"));
    free(error);

    write_bytes(temp_path("junk.npy"), "hello world", 11);
    ck_assert_int_ne(kj_npy_read(temp_path("junk.npy"), &r, &error), KJIT_OK);
    ck_assert_ptr_nonnull(strstr(error, "not a .npy file"));
    free(error);

    ck_assert_int_eq(kj_npy_read(temp_path("missing.npy"), &r, &error), KJIT_ERROR_IO);
    ck_assert_ptr_nonnull(strstr(error, "missing.npy"));
    free(error);
    remove_temp_dir();
}
END_TEST

/* A header whose dict or size np.load would refuse: an error naming it. */
static void assert_refused(const char *name, const char *dict, const void *data, size_t size,
                           kjit_status want, const char *text)
{
    write_npy_raw(temp_path(name), 1, dict, data, size);
    kjit_array r;
    memset(&r, 0xab, sizeof r);
    char *error = NULL;
    kjit_status got = kj_npy_read(temp_path(name), &r, &error);
    ck_assert_msg(got == want, "%s: status %d, not %d (%s)", name, got, want, error);
    ck_assert_msg(strstr(error, text), "%s: '%s' lacks '%s'", name, error, text);
    ck_assert_ptr_null(r.data);
    free(error);
}

START_TEST(header_sizes_and_keys)
{
    make_temp_dir();
    unsigned char data[64] = {0};
    /* sizes that overflow: no 64-byte buffer for 2^64 bytes */
    assert_refused("f4.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }",
                   data, sizeof data, KJIT_ERROR_INVALID_ARGUMENT, "more than 2^63 - 1 bytes");
    assert_refused("u1.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
                   data, sizeof data, KJIT_ERROR_INVALID_ARGUMENT,
                   "the shape (4294967296,4294967296) of u8 elements");
    /* a claim past the file's size, refused before it is allocated */
    assert_refused("40g.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (5000000000,), }",
                   data, sizeof data, KJIT_ERROR_INVALID_ARGUMENT,
                   "truncated: the header claims 40000000000 bytes of data, the file holds 64");
    assert_refused("short.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (9,), }", data,
                   sizeof data, KJIT_ERROR_INVALID_ARGUMENT,
                   "the header claims 72 bytes of data, the file holds 64");
    /* the dict: each key once, no others, fortran_order a bool */
    assert_refused("twice.npy",
                   "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (4,), }", data,
                   16, KJIT_ERROR_INVALID_ARGUMENT, "the header gives 'shape' twice");
    assert_refused("descr2.npy",
                   "{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", data,
                   16, KJIT_ERROR_INVALID_ARGUMENT, "the header gives 'descr' twice");
    assert_refused("extra.npy",
                   "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'mode': 'x', }", data, 16,
                   KJIT_ERROR_INVALID_ARGUMENT, "the key 'mode'");
    assert_refused("noshape.npy", "{'descr': '<f4', 'fortran_order': False, }", data, 16,
                   KJIT_ERROR_INVALID_ARGUMENT, "the header has no 'shape'");
    assert_refused("order.npy", "{'descr': '<f4', 'fortran_order': 1, 'shape': (2,), }", data, 16,
                   KJIT_ERROR_INVALID_ARGUMENT, "neither True nor False");
    assert_refused("notdict.npy", "['descr', '<f4']", data, 16, KJIT_ERROR_INVALID_ARGUMENT,
                   "not a dict");
    assert_refused("open.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,", data, 16,
                   KJIT_ERROR_INVALID_ARGUMENT, "'shape'");
    /* what NumPy writes, keys in any order, double quotes, no trailing comma */
    float two[2] = {1.5f, -2};
    write_npy_raw(temp_path("ok.npy"), 1, "{\"shape\": (2,), 'fortran_order': False, 'descr': '<f4'}",
                  two, sizeof two);
    kjit_array r;
    char *error = NULL;
    ck_assert_msg(kj_npy_read(temp_path("ok.npy"), &r, &error) == KJIT_OK, "%s", error);
    ck_assert(r.ndim == 1 && r.shape[0] == 2 && ((float *)r.data)[1] == -2);
    kjit_array_free(&r);
    remove_temp_dir();
}
END_TEST

/* The writer: a file replaced whole, no temporary left behind, and views
 * that describe no array refused. */
START_TEST(writes_whole_files)
{
    make_temp_dir();
    double data[3] = {1, 2, 3};
    int64_t n = 3;
    kjit_array a = kjit_array_make(data, KJIT_F64, 1, &n);
    char *error = NULL;
    char path[160];
    snprintf(path, sizeof path, "%s", temp_path("out.npy")); /* temp_path's buffer is reused */
    write_bytes(path, "an older file", 13);
    ck_assert_int_eq(kj_npy_write(path, &a, &error), KJIT_OK);
    kjit_array r;
    ck_assert_int_eq(kj_npy_read(path, &r, &error), KJIT_OK);
    ck_assert(r.shape[0] == 3 && ((double *)r.data)[2] == 3);
    kjit_array_free(&r);
    char command[256];
    snprintf(command, sizeof command, "test $(ls -A '%s' | wc -l) -eq 1", temp_dir);
    ck_assert_msg(system(command) == 0, "a temporary file was left in %s", temp_dir);
    /* a folder that does not exist: an error naming the file, nothing created */
    ck_assert_int_eq(kj_npy_write(temp_path("none/out.npy"), &a, &error), KJIT_ERROR_IO);
    ck_assert_msg(strstr(error, "none/out.npy"), "%s", error);
    free(error);
    /* nine dimensions are no array to write */
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 3};
    kjit_array bad = kjit_array_make(data, KJIT_F64, 9, nine);
    ck_assert_int_eq(kj_npy_write(path, &bad, &error), KJIT_ERROR_INVALID_ARGUMENT);
    free(error);
    ck_assert_int_eq(kj_npy_read(path, &r, &error), KJIT_OK); /* the last good file stays */
    kjit_array_free(&r);
    remove_temp_dir();
}
END_TEST

/* Files NumPy itself wrote, when python3 with numpy is installed. */
START_TEST(reads_what_numpy_writes)
{
    make_temp_dir();
    char command[512];
    snprintf(command, sizeof command,
             "python3 -c \"import numpy as np; np.save('%s', "
             "(np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.5))\" 2>/dev/null",
             temp_path("np.npy"));
    if (system(command) != 0) {
        remove_temp_dir();
        return; /* no numpy here: the hand-made headers above cover the format */
    }
    kjit_array r;
    char *error = NULL;
    ck_assert_int_eq(kj_npy_read(temp_path("np.npy"), &r, &error), KJIT_OK);
    ck_assert_int_eq(r.dtype, KJIT_F32);
    ck_assert_int_eq(r.ndim, 3);
    for (int i = 0; i < 24; i++)
        ck_assert(((float *)r.data)[i] == (float)i * 0.5f);
    ck_assert_int_eq(kj_npy_write(temp_path("back.npy"), &r, &error), KJIT_OK);
    snprintf(command, sizeof command,
             "python3 -c \"import numpy as np, sys; a = np.load('%s'); "
             "sys.exit(0 if a.shape == (2, 3, 4) and (a == np.arange(24).reshape(2, 3, 4) * 0.5).all() else 1)\"",
             temp_path("back.npy"));
    ck_assert_int_eq(system(command), 0);
    kjit_array_free(&r);
    remove_temp_dir();
}
END_TEST

Suite *suite_npy(void)
{
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("npy");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, round_trip_every_dtype);
    tcase_add_test(tc, scalar_and_empty_arrays);
    tcase_add_test(tc, strided_view_is_gathered);
    tcase_add_test(tc, fortran_order_and_version_2);
    tcase_add_test(tc, errors_name_the_problem);
    tcase_add_test(tc, header_sizes_and_keys);
    tcase_add_test(tc, writes_whole_files);
    tcase_add_test(tc, reads_what_numpy_writes);
    suite_add_tcase(s, tc);
    return s;
}
