/* gitconfig.c: see gitconfig.h.  The reader follows git's config.c
 * (get_next_char, get_base_var, get_extended_base_var, get_value,
 * parse_value) rule for rule, so that what it gives is what git sees:
 * a value continued with a trailing backslash is one value, a '#' or ';'
 * outside quotes starts a comment, a quoted one does not. */
#include "util/gitconfig.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct lexer {
    const char *p, *end;
};

/* The next byte, "\r\n" read as '\n'; EOF at the end. */
static int next_char(struct lexer *l) {
    if (l->p >= l->end)
        return EOF;
    int c = (unsigned char)*l->p++;
    if (c == '\r' && l->p < l->end && *l->p == '\n') {
        l->p++;
        c = '\n';
    }
    return c;
}

/* git's sane_ctype: ASCII only, whatever the locale */
static bool is_space(int c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
static bool is_alpha(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_keychar(int c) {
    return is_alpha(c) || (c >= '0' && c <= '9') || c == '-';
}
static int lower(int c) {
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* A section header after its '[' into sec (its subsection, if any, after
 * the section's NUL: *ret_sub); -1 when git rejects it.  sec holds the
 * rest of the file and two NULs. */
static int read_section(struct lexer *l, char *sec, char **ret_sub) {
    size_t n = 0;
    *ret_sub = NULL;
    for (;;) {
        int c = next_char(l);
        if (c == EOF || c == '\n')
            return -1;
        if (c == ']')
            break;
        if (is_space(c)) { /* [section "subsection"] */
            sec[n++] = '\0';
            char *sub = sec + n;
            size_t m = 0;
            do
                c = next_char(l);
            while (c == ' ' || c == '\t' || c == '\r');
            if (c != '"')
                return -1;
            while ((c = next_char(l)) != '"') {
                if (c == '\\')
                    c = next_char(l);
                if (c == EOF || c == '\n')
                    return -1;
                sub[m++] = (char)c;
            }
            sub[m] = '\0';
            if (next_char(l) != ']')
                return -1;
            *ret_sub = sub;
            return 0;
        }
        if (!is_keychar(c) && c != '.')
            return -1;
        sec[n++] = (char)lower(c);
    }
    sec[n] = '\0';
    char *dot = strchr(sec, '.'); /* [section.sub]: the old spelling */
    if (dot) {
        *dot = '\0';
        *ret_sub = dot + 1;
    }
    return 0;
}

/* A value after its '=' into out (at most the rest of the file); -1 when
 * git rejects it (a bad escape, a quote not closed on its line). */
static int read_value(struct lexer *l, char *out) {
    size_t n = 0, space = 0;
    bool quote = false, comment = false;
    for (;;) {
        int c = next_char(l);
        if (c == EOF || c == '\n') {
            out[n] = '\0';
            return quote ? -1 : 0;
        }
        if (comment)
            continue;
        if (is_space(c) && !quote) {
            space += n > 0; /* blanks inside the value are kept, as one each */
            continue;
        }
        if (!quote && (c == ';' || c == '#')) {
            comment = true;
            continue;
        }
        for (; space; space--)
            out[n++] = ' ';
        if (c == '\\') {
            switch ((c = next_char(l))) {
            case '\n': /* a continuation: the value goes on on the next line */ continue;
            case 't': c = '\t'; break;
            case 'b': c = '\b'; break;
            case 'n': c = '\n'; break;
            case '\\':
            case '"': break;
            default: return -1;
            }
        } else if (c == '"') {
            quote = !quote;
            continue;
        }
        out[n++] = (char)c;
    }
}

int gitconfig_parse(const char *buf, size_t len, gitconfig_fn fn, void *userdata) {
    struct lexer l = {buf, buf + len};
    if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0) /* a UTF-8 BOM, which git skips */
        l.p += 3;
    /* each holds at most the rest of the file: no bound to check below */
    _cleanup_free_ char *sec = malloc(len + 2), *key = malloc(len + 1), *val = malloc(len + 1);
    if (!sec || !key || !val)
        return -ENOMEM;
    char *sub = NULL;
    bool in_section = false, comment = false;
    for (;;) {
        int c = next_char(&l);
        if (c == EOF)
            return 0;
        if (c == '\n') {
            comment = false;
            continue;
        }
        if (comment || is_space(c))
            continue;
        if (c == '#' || c == ';') {
            comment = true;
            continue;
        }
        if (c == '[') {
            if (read_section(&l, sec, &sub) < 0)
                return 1;
            in_section = true;
            continue;
        }
        if (!is_alpha(c) || !in_section) /* a key outside any section: git refuses it */
            return 1;
        size_t k = 0;
        key[k++] = (char)lower(c);
        while (is_keychar(c = next_char(&l)))
            key[k++] = (char)lower(c);
        key[k] = '\0';
        while (c == ' ' || c == '\t')
            c = next_char(&l);
        const char *value = NULL; /* "key" alone: true */
        if (c != '\n' && c != EOF) {
            if (c != '=' || read_value(&l, val) < 0)
                return 1;
            value = val;
        }
        int r = fn(sec, sub, key, value, userdata);
        if (r < 0)
            return r;
    }
}

bool gitconfig_is_include(const char *section, const char *subsection, const char *key) {
    return strcmp(key, "path") == 0 &&
           ((strcmp(section, "include") == 0 && !subsection) || (strcmp(section, "includeif") == 0 && subsection));
}

/* The home directory of user (name of len bytes), malloc'd; NULL when
 * there is no such user (*ret_oom: out of memory). */
static char *user_home(const char *name, size_t len, bool *ret_oom) {
    _cleanup_free_ char *u = strndup(name, len);
    *ret_oom = !u;
    if (!u)
        return NULL;
    char sbuf[4096];
    struct passwd pw, *res = NULL;
    if (getpwnam_r(u, &pw, sbuf, sizeof sbuf, &res) != 0 || !res || !res->pw_dir)
        return NULL;
    char *h = strdup(res->pw_dir);
    *ret_oom = !h;
    return h;
}

int gitconfig_include_path(const char *value, const char *from, const char *home, char **ret) {
    char *p = NULL;
    if (strncmp(value, "%(prefix)/", 10) == 0)
        return 0;          /* git's runtime prefix: not the user's */
    if (value[0] == '~') { /* git's interpolate_path */
        const char *slash = strchrnul(value, '/');
        bool oom = false;
        _cleanup_free_ char *h =
            slash == value + 1 ? (home ? strdup(home) : NULL) : user_home(value + 1, (size_t)(slash - value - 1), &oom);
        if (oom || (slash == value + 1 && home && !h))
            return -ENOMEM;
        if (!h)
            return 0;
        p = str_printf("%s%s", h, slash);
    } else if (value[0] == '/') {
        p = strdup(value);
    } else { /* relative to the including file's directory */
        const char *dir_end = from ? strrchr(from, '/') : NULL;
        if (!dir_end || !value[0])
            return 0;
        p = str_printf("%.*s/%s", (int)(dir_end - from), from, value);
    }
    if (!p)
        return -ENOMEM;
    *ret = p;
    return 1;
}
