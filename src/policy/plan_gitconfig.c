/* plan_gitconfig.c: see plan_gitconfig.h.  git's global config is the
 * user's settings (user.name, aliases), which the command gets; some keep
 * a token there too: a URL that carries one
 * (url."https://TOKEN@github.com/".insteadOf, GitHub's advice for CI), an
 * http.extraHeader (Authorization: Bearer ...), a credential helper that
 * echoes a password, a token or password key (hub's, GitHub's old
 * github.token), or in a file it includes ([include] path =
 * ~/.gitconfig-work).  Such a file is kept from the command whole (found
 * by red-team passes: each was readable).
 *
 * No system calls but the reads of the config files (a FIFO is not
 * waited on) and the resolution of their paths. */
#include "policy/plan_gitconfig.h"
#include "util/cleanup.h"
#include "util/gitconfig.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define INCLUDE_DEPTH_MAX 10 /* git's MAX_INCLUDE_DEPTH: deeper, git refuses the config */
#define FILES_MAX 64         /* distinct files one global config's includes reach */
#define INCLUDES_MAX 64      /* includes one file names */
#define TOKEN_USER_MIN 20

/* Is the user part of the URL whose authority starts at u (just after
 * its "://") a token rather than a name: a classic GitHub token (40 hex
 * digits; any of 32 or more hex digits with letters and digits in it) or
 * 20 or more letters, digits, '-' and '_' in which letters and digits
 * alternate at least four times (GitHub's, Gitea's, Azure DevOps'
 * personal access tokens)?  A user name is none: "alice", "git",
 * "first.last", an e-mail address (a '.', a '%40'), "build-agent-2024". */
static bool url_user_is_token(const char *u) {
    size_t auth = strcspn(u, "/?#\"' \t\n");
    const char *at = NULL;
    for (size_t i = 0; i < auth; i++)
        if (u[i] == '@')
            at = u + i;
    if (!at)
        return false;
    size_t ul = strcspn(u, ":@"); /* a password after ':': the patterns' */
    if (ul < TOKEN_USER_MIN)
        return false;
    size_t letters = 0, digits = 0, alternations = 0;
    bool hex = true;
    int prev = 0; /* 1 a letter, 2 a digit, 0 neither */
    for (size_t i = 0; i < ul; i++) {
        char c = u[i];
        int kind = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ? 1 : c >= '0' && c <= '9' ? 2 : 0;
        if (kind == 0 && c != '-' && c != '_')
            return false; /* '.', '%', '+': a name, an address */
        letters += kind == 1;
        digits += kind == 2;
        hex = hex && (kind == 2 || (kind == 1 && strchr("abcdefABCDEF", c)));
        alternations += kind && prev && kind != prev;
        prev = kind;
    }
    return letters && digits && ((hex && ul >= 32) || alternations >= 4);
}

/* a key may follow its section's header on the same line ([http]
 * extraheader = ...) */
#define GC_KEY "^[[:space:]]*(\\[[^]]*\\][[:space:]]*)?"
static const char *const patterns[] = {
    /* a URL with a password (user:secret@), or a token for the user
     * (GitHub's and GitLab's token prefixes; url_user_is_token: one
     * without a prefix); not a user name alone
     * (https://alice@dev.azure.com/, Bitbucket's), nor ssh://git@ */
    "(https?|ftps?)://[^/@:[:space:]\"]*:[^/@[:space:]\"]+@",
    "(https?|ftps?)://(x-access-token|oauth2|gh[pousr]_|github_pat_|glpat-)[^/@[:space:]\"]*@",
    GC_KEY "extraheader[[:space:]]*=",                                 /* http.extraHeader */
    GC_KEY "helper[[:space:]]*=.*password[[:space:]]*=",               /* an inline helper */
    GC_KEY "(oauthtoken|token|password|secret|smtppass)[[:space:]]*=", /* hub, github.token */
};
#undef GC_KEY

/* Does a line of text (not a comment) hold a credential?  Each line is
 * cut at its '\n' while it is looked at. */
static bool lines_hold(char *text, regex_t *re) {
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next = '\0';
        const char *t = line + strspn(line, " \t");
        bool found = false;
        for (size_t i = 0; *t != '#' && *t != ';' && i < ARRAY_SIZE(patterns) && !found; i++)
            found = regexec(&re[i], line, 0, NULL, 0) == 0;
        for (const char *s = line; *t != '#' && *t != ';' && !found && (s = strstr(s, "://")); s += 3)
            found = url_user_is_token(s + 3);
        if (next)
            *next++ = '\n';
        if (found)
            return true;
    }
    return false;
}

/* git's variables, one a line: "[section "sub"]" before each that has a
 * subsection (a URL there), then "key = value" ("\n" in it a blank). */
static int render_var(const char *section, const char *sub, const char *key, const char *value, void *userdata) {
    FILE *f = userdata;
    if (sub)
        fprintf(f, "[%s \"%s\"]\n", section, sub);
    fprintf(f, "%s", key);
    if (value) {
        fputs(" = ", f);
        for (const char *c = value; *c; c++)
            fputc(*c == '\n' ? ' ' : *c, f);
    }
    fputc('\n', f);
    return 0;
}

bool plan_gitconfig_text_holds_credential(const char *text, size_t len) {
    /* three views, one after the other: the lines as written; the same
     * with each continuation joined ("url = https://alice:\" and
     * "  s3cret@host", the next line's indent cut); each variable as git
     * reads it (comments out, quotes and escapes applied) */
    _cleanup_free_ char *all = NULL;
    size_t all_len = 0;
    _cleanup_fclose_ FILE *f = open_memstream(&all, &all_len);
    if (!f)
        return true; /* out of memory: cannot be told, kept from the command */
    for (size_t i = 0; i < len; i++)
        fputc(text[i] ? text[i] : ' ', f);
    fputc('\n', f);
    for (size_t i = 0; i < len; i++) {
        size_t j = i + 1 + (i + 1 < len && text[i + 1] == '\r');
        if (text[i] == '\\' && j < len && text[j] == '\n') {
            for (i = j + 1; i < len && (text[i] == ' ' || text[i] == '\t');)
                i++;
            i--;
            continue;
        }
        fputc(text[i] ? text[i] : ' ', f);
    }
    fputc('\n', f);
    if (gitconfig_parse(text, len, render_var, f) < 0 || fflush(f) != 0 || ferror(f))
        return true;
    fclose(TAKE_PTR(f));
    /* most configs hold none of what the patterns look for: no regcomp
     * for those (a run's start); the words below are in every match */
    static const char *const words[] = {"extraheader", "token", "password", "secret", "smtppass"};
    bool maybe = strstr(all, "://") && strchr(all, '@');
    for (size_t i = 0; i < ARRAY_SIZE(words) && !maybe; i++)
        maybe = strcasestr(all, words[i]) != NULL;
    if (!maybe)
        return false;
    regex_t re[ARRAY_SIZE(patterns)];
    size_t n = 0;
    for (; n < ARRAY_SIZE(patterns); n++)
        if (regcomp(&re[n], patterns[n], REG_EXTENDED | REG_ICASE | REG_NOSUB | REG_NEWLINE) != 0)
            break;
    bool found = n < ARRAY_SIZE(patterns) || lines_hold(all, re); /* one did not compile: cannot be told */
    while (n)
        regfree(&re[--n]);
    return found;
}

/* The bytes of the regular file path (a symlink followed: dotfiles
 * managers link it; a FIFO not waited on), at most 1 MiB, NUL-terminated:
 * 1 and *ret, *ret_len; 0 when none, unreadable (to the command too) or
 * larger than a config is; -ENOMEM. */
static int read_config(const char *path, char **ret, size_t *ret_len) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20))
        return 0;
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf)
        return -ENOMEM;
    ssize_t n = pread(fd, buf, (size_t)st.st_size, 0);
    if (n < 0) {
        free(buf);
        return 0;
    }
    buf[n] = '\0';
    *ret = buf;
    *ret_len = (size_t)n;
    return 1;
}

struct walk_file {
    char *named, *real;
    bool holds; /* it, or a file it includes, holds a credential */
};

struct walk {
    const char *home;
    struct walk_file files[FILES_MAX];
    size_t n;
};

struct includes {
    char *v[INCLUDES_MAX];
    size_t n;
    const char *from, *home;
    bool more; /* more than INCLUDES_MAX */
};

static int collect_include(const char *section, const char *sub, const char *key, const char *value, void *userdata) {
    struct includes *inc = userdata;
    if (!value || !gitconfig_is_include(section, sub, key))
        return 0;
    if (inc->n >= INCLUDES_MAX) {
        inc->more = true;
        return 0;
    }
    char *p = NULL;
    int r = gitconfig_include_path(value, inc->from, inc->home, &p);
    if (r > 0)
        inc->v[inc->n++] = p;
    return r;
}

/* Does path, or a file it includes, hold a credential?  1 yes, 0 no,
 * -ENOMEM.  Each file is read once: a loop, or one included twice, is
 * that file's answer (its own text's while it is being looked at). */
static int walk_config(struct walk *w, const char *path, int depth) {
    _cleanup_free_ char *real = realpath(path, NULL);
    if (!real && errno == ENOMEM)
        return -ENOMEM;
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->files[i].real ? w->files[i].real : w->files[i].named, real ? real : path) == 0)
            return w->files[i].holds;
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = read_config(path, &text, &len);
    if (r <= 0)
        return r;
    if (w->n >= FILES_MAX)
        return 1; /* more than a config reaches: cannot be told, kept */
    struct walk_file *me = &w->files[w->n];
    *me = (struct walk_file){.named = strdup(path), .real = TAKE_PTR(real)};
    if (!me->named) {
        free(me->real);
        return -ENOMEM;
    }
    size_t mine = w->n++;
    w->files[mine].holds = plan_gitconfig_text_holds_credential(text, len);
    struct includes inc = {.n = 0, .from = path, .home = w->home};
    r = gitconfig_parse(text, len, collect_include, &inc);
    bool holds = w->files[mine].holds || inc.more; /* more includes than looked at: kept */
    for (size_t i = 0; i < inc.n && r >= 0; i++) {
        /* deeper than git goes: git refuses the config (not looked at) */
        int h = depth < INCLUDE_DEPTH_MAX ? walk_config(w, inc.v[i], depth + 1) : 0;
        if (h < 0)
            r = h;
        holds = holds || h > 0;
    }
    for (size_t i = 0; i < inc.n; i++)
        free(inc.v[i]);
    if (r < 0)
        return r;
    w->files[mine].holds = holds;
    return holds;
}

int plan_gitconfig_credential_files(const char *path, const char *home, char ***ret) {
    struct walk w = {.home = home, .n = 0};
    int r = walk_config(&w, path, 0);
    char **v = r >= 0 ? calloc(w.n + 1, sizeof *v) : NULL;
    size_t n = 0;
    for (size_t i = 0; i < w.n; i++) {
        if (v && w.files[i].holds)
            v[n++] = TAKE_PTR(w.files[i].named);
        free(w.files[i].named);
        free(w.files[i].real);
    }
    if (r >= 0 && !v)
        r = -ENOMEM;
    if (r < 0) {
        for (size_t i = 0; v && i < n; i++)
            free(v[i]);
        free(v);
        return r;
    }
    *ret = v;
    return 0;
}
