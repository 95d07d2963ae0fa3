/* gitconfig.h: git's config file syntax (git-config(1), "CONFIGURATION
 * FILE"), read as git's own reader (config.c) reads it: sections
 * ("[section]", "[section \"subsection\"]", the old "[section.sub]"),
 * keys and values with their quotes, escapes, comments and backslash
 * line continuations, and the file an include names.
 *
 * Pure: no I/O but the password database for "~user/".  Library code:
 * negative errno, never prints.
 */
#ifndef PVISOR_UTIL_GITCONFIG_H
#define PVISOR_UTIL_GITCONFIG_H

#include <stdbool.h>
#include <stddef.h>

/* One variable: section and key lowercased; subsection as written (NULL
 * when there is none; "[a.B]" gives "b", lowercased as git does); value
 * with its quotes removed, its escapes and continuations applied and
 * its trailing blanks cut, NULL for a key alone (git's boolean true).
 * A negative return stops the walk. */
typedef int (*gitconfig_fn)(const char *section, const char *subsection, const char *key, const char *value,
                            void *userdata);

/* Calls fn for each variable of buf[0, len), in order.  0 at the end; 1
 * at a line git rejects (a bad section header, key, escape or an
 * unterminated quote: git refuses the whole file, here the variables
 * before it were given); fn's negative return; -ENOMEM. */
int gitconfig_parse(const char *buf, size_t len, gitconfig_fn fn, void *userdata);

/* Is (section, subsection, key) an include: include.path or
 * includeIf.<condition>.path (whatever the condition)? */
bool gitconfig_is_include(const char *section, const char *subsection, const char *key);

/* The file an include's value names, as git resolves it: "~" and "~/"
 * are home's, "~user/" that user's home (the password database), a
 * relative path is relative to the directory of from (the including
 * file, as it was named: a symlink to it not resolved).  1 and *ret
 * (malloc'd, not normalised); 0 when git cannot tell it either (no home,
 * no such user, a relative one without from, "%(prefix)/"); -ENOMEM. */
int gitconfig_include_path(const char *value, const char *from, const char *home, char **ret);

#endif
