/* diff_binary.h: a changed binary file as git's binary patch (diff_binary.c). */
#ifndef PVISOR_CLI_DIFF_BINARY_H
#define PVISOR_CLI_DIFF_BINARY_H

#include <stddef.h>
#include <stdio.h>

/* Print, after the file's "diff --git" and mode lines, its full index line
 * and "GIT binary patch" with the new and the old content as literal
 * hunks.  old_fd/new_fd: the two sides (-1: that side does not exist, a
 * file added or deleted), read whole from offset 0; a side over max bytes
 * is -EFBIG before anything is printed.  0 or -errno. */
int diff_git_binary(FILE *out, int old_fd, int new_fd, size_t max);

#endif
