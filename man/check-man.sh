#!/bin/sh
# check-man.sh - check the manual pages in this directory; prints TAP.
#
#   man/check-man.sh [SP]
#
# For every page: groff -man -Tutf8 -ww -z prints no warning (at the default
# line length and at 78 and 100 columns), and the page has the sections every
# page must have.  With SP (the path of the sp binary): every command listed
# by 'sp --help' has a page and is listed in sp.1, and every option printed
# by 'sp CMD --help' (and 'sp CMD ACTION --help' for commands with actions,
# such as 'sp metadata export') appears in that command's page.  A command
# that has no page yet is reported as a TAP TODO (not ok ... # TODO).
# Exit status: 0 when every test passed, 1 otherwise.
set -u

dir=$(cd "$(dirname "$0")" && pwd)
sp=${1:-}
pages="sp.1 sp-inspect.1 sp-verify.1 sp-uid-hash.1 sp-metadata.1 sp-relocate.1 sp-dispose.1 sp-list.1 sp-prune.1 sp-pin.1"
pages="$pages sp-check.1 sp-diff.1"
pages="$pages sp-trigger.1 sp-stop.1 sp-status.1 sp-restore.1 sp-jobs.1"

if ! command -v groff >/dev/null 2>&1; then
    echo "Bail out! groff not found (Debian/Ubuntu: apt-get install groff-base)"
    exit 1
fi
if [ -n "$sp" ] && [ ! -x "$sp" ]; then
    echo "Bail out! $sp is not an executable sp binary"
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-man.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
results=$tmp/results
: >"$results"
n=0
failed=0

# ok CONDITION-EXIT-STATUS DESCRIPTION [DIAGNOSTIC-FILE]
report() {
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $n - $2" >>"$results"
    else
        failed=$((failed + 1))
        echo "not ok $n - $2" >>"$results"
        if [ -n "${3:-}" ] && [ -s "$3" ]; then
            sed 's/^/# /' "$3" >>"$results"
        fi
    fi
}

# The page as plain text: no hyphenation breaks, one very long line length
# so that no option name is split, no bold/underline overstriking.
render() {
    groff -man -Tascii -rLL=2000n -P-c -P-b -P-o -P-u "$dir/$1" 2>/dev/null
}

# ---- every page: groff warnings and sections ----
for page in $pages; do
    if [ ! -f "$dir/$page" ]; then
        echo "missing file $dir/$page" >"$tmp/diag"
        report 1 "$page exists" "$tmp/diag"
        continue
    fi
    : >"$tmp/diag"
    for ll in "" -rLL=78n -rLL=100n; do
        # shellcheck disable=SC2086 # $ll is empty or one word
        groff -man -Tutf8 -ww -z $ll "$dir/$page" >>"$tmp/diag" 2>&1 ||
            echo "groff exited with status $? (${ll:-default line length})" >>"$tmp/diag"
    done
    if [ -s "$tmp/diag" ]; then report 1 "$page: groff -man -Tutf8 -ww -z prints no warning" "$tmp/diag"
    else report 0 "$page: groff -man -Tutf8 -ww -z prints no warning"; fi

    case $page in
    sp.1) sections="NAME|SYNOPSIS|DESCRIPTION|COMMANDS|OPTIONS|OUTPUT|EXIT STATUS|ENVIRONMENT|EXAMPLES|SEE ALSO" ;;
    *) sections="NAME|SYNOPSIS|DESCRIPTION|OPTIONS|OUTPUT|EXIT STATUS|EXAMPLES|SEE ALSO" ;;
    esac
    : >"$tmp/diag"
    have=$(sed -n 's/^\.SH  *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$dir/$page")
    old_ifs=$IFS
    IFS='|'
    for s in $sections; do
        printf '%s\n' "$have" | grep -qx -- "$s" || echo "no .SH $s" >>"$tmp/diag"
    done
    IFS=$old_ifs
    if [ -s "$tmp/diag" ]; then report 1 "$page has the required sections" "$tmp/diag"
    else report 0 "$page has the required sections"; fi
done

# ---- meson.build installs every page ----
: >"$tmp/diag"
for page in $pages; do
    grep -q "'$page'" "$dir/meson.build" || echo "$page is not in install_man()" >>"$tmp/diag"
done
for f in "$dir"/*.[1-9]; do
    [ -f "$f" ] || continue
    b=$(basename "$f")
    case " $pages " in *" $b "*) ;; *) echo "$b is not checked by check-man.sh" >>"$tmp/diag" ;; esac
done
if [ -s "$tmp/diag" ]; then report 1 "meson.build installs every page" "$tmp/diag"
else report 0 "meson.build installs every page"; fi

# ---- the pages against the binary's --help ----
# option_names FILE: every --long and -s option named in a help text.
option_names() {
    grep -oE -- '(^|[^[:alnum:]-])--?[[:alnum:]][[:alnum:]-]*' "$1" |
        sed 's/^[^-]*//' |
        grep -vE -- '^-[0-9]' | sort -u
}

# documents PAGE OPTION: the rendered page names OPTION as a word.
documents() {
    grep -qE -- "(^|[^[:alnum:]-])$2([^[:alnum:]-]|$)" "$tmp/$1.txt"
}

if [ -n "$sp" ]; then
    for page in $pages; do
        [ -f "$dir/$page" ] && render "$page" >"$tmp/$page.txt"
    done
    "$sp" --help >"$tmp/top.help" 2>&1
    report $? "sp --help exits 0"
    commands=$(sed -n '/^commands:/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p' "$tmp/top.help")
    if [ -n "$commands" ]; then report 0 "sp --help lists commands: $(echo $commands)"
    else report 1 "sp --help lists commands" "$tmp/top.help"; fi

    # exit codes named in 'sp --help' are described in sp.1
    : >"$tmp/diag"
    for code in $(sed -n '/^Exit codes:/,$p' "$tmp/top.help" | grep -oE '(^|[ :,])[0-9]+ ' | tr -dc '0-9\n'); do
        grep -qx "       $code" "$tmp/sp.1.txt" 2>/dev/null ||
            grep -qE "^ +$code +[A-Z]" "$tmp/sp.1.txt" 2>/dev/null ||
            echo "exit code $code is not described in sp.1" >>"$tmp/diag"
    done
    if [ -s "$tmp/diag" ]; then report 1 "sp.1 describes every exit code of sp --help" "$tmp/diag"
    else report 0 "sp.1 describes every exit code of sp --help"; fi

    for opt in $(option_names "$tmp/top.help"); do
        documents sp.1 "$opt"
        report $? "sp.1 documents $opt (sp --help)"
    done

    for cmd in $commands; do
        page=sp-$cmd.1
        # commands documented on another command's page (installed as a link)
        case $cmd in unpin) page=sp-pin.1 ;; esac
        if [ ! -f "$dir/$page" ]; then
            # A command without a page yet is shown, not counted as a failure
            # (TAP TODO), so that a new command can land before its page.
            n=$((n + 1))
            echo "not ok $n - $page exists for command $cmd # TODO write man/$page" >>"$results"
            continue
        fi
        report 0 "$page exists for command $cmd"
        grep -qE "^ +$cmd( |$)" "$tmp/sp.1.txt"
        report $? "sp.1 lists command $cmd"

        "$sp" "$cmd" --help >"$tmp/$cmd.help" 2>&1
        report $? "sp $cmd --help exits 0"
        # actions: the first word of each alternative of the usage line
        # ("usage: sp metadata export SNAP ... | import JSON OUT ...")
        actions=$(sed -n "s/^usage: sp $cmd //p" "$tmp/$cmd.help" | head -n 1 |
            awk -F ' [|] ' '{ for (i = 1; i <= NF; i++) print $i }' |
            sed -n 's/^\([a-z][a-z0-9-]*\)\( .*\)\{0,1\}$/\1/p')
        cp "$tmp/$cmd.help" "$tmp/$cmd.all"
        for action in $actions; do
            "$sp" "$cmd" "$action" --help >"$tmp/$cmd.$action.help" 2>&1
            report $? "sp $cmd $action --help exits 0"
            cat "$tmp/$cmd.$action.help" >>"$tmp/$cmd.all"
        done
        for opt in $(option_names "$tmp/$cmd.all"); do
            documents "$page" "$opt"
            report $? "$page documents $opt (sp $cmd${actions:+ $(echo $actions | tr ' ' '|')} --help)"
        done
    done
fi

echo "1..$n"
cat "$results"
[ "$failed" -eq 0 ]
