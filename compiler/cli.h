/*
 * cli.h: the commands of the kjit CLI that live in their own cli_ files, as
 * main.c dispatches to them.  Each takes the arguments after the command name
 * and returns the exit code: 0 success, 1 errors in the program or a failed
 * run, 2 usage or I/O errors.
 */
#ifndef KJIT_CLI_H
#define KJIT_CLI_H

#include <stdbool.h>

#include "../runtime/kjit.h"

/* cli_run.c: kjit run FILE FUNCTION [ARG...] [options] */
int kj_cli_run(int argc, char **argv);

/* cli_info.c: kjit info */
int kj_cli_info(int argc, char **argv);

/* cli_png.c: a 2-D array as an 8-bit grayscale PNG (u8 as it is, other types
 * scaled from their min..max); false and *error (heap) on failure. */
bool kj_png_write(const char *path, const kjit_array *array, char **error);

#endif
