#!/usr/bin/env bash
# check_hooked.sh -- no object of tdax but the hooks calls a name libtdax.so
# hooks (src/sys.h says why). Usage: check_hooked.sh LIB OBJECT...
# (the hooks' own objects, src/interpose*.o, are left out by the caller).
set -euo pipefail
lib=$1
shift
hooks=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TW]$/ && $3 !~ /^tdax_/ {print $3}' | sort -u)
bad=0
for o in "$@"; do
	hit=$(nm -u "$o" | awk '{print $2}' | sort -u | comm -12 - <(echo "$hooks") | tr '\n' ' ')
	if [ -n "$hit" ]; then
		echo "check_hooked: $o calls hooked names: $hit(use src/sys.h or tdax_real)" >&2
		bad=1
	fi
done
[ $bad = 0 ] && echo "check_hooked: $# objects call no hooked name"
exit $bad
