/* plan_gitconfig.h: does git's global config hold a credential?  Part of
 * the plan (plan_build.c keeps what this finds from the command). */
#ifndef PVISOR_POLICY_PLAN_GITCONFIG_H
#define PVISOR_POLICY_PLAN_GITCONFIG_H

#include <stdbool.h>
#include <stddef.h>

/* Does text[0, len) (a config file's bytes) hold a credential: a URL with a password or
 * a token for its user, an http.extraHeader, a credential helper that
 * echoes a password, a token or password key?  Looked for in each line
 * as written (comments skipped) and in each variable as git reads it
 * (continued lines joined). */
bool plan_gitconfig_text_holds_credential(const char *text, size_t len);

/* The files to keep from the command for the git config file path
 * (named as git opens it: GIT_CONFIG_GLOBAL's, ~/.gitconfig, XDG's): the
 * files that hold a credential, path and those its includes reach
 * (include.path, includeIf.*.path whatever the condition; "~/" is
 * home's, a relative path relative to the including file's directory;
 * nested to git's depth of 10, each file once), and each file that
 * includes one of them (path too).  *ret NULL-terminated, malloc'd
 * paths as named (free with plan_moved_free's rule: each, then the
 * array), empty when none.  -ENOMEM. */
int plan_gitconfig_credential_files(const char *path, const char *home, char ***ret);

#endif
