#!/bin/sh
# Keep only the read verbs (get, list, watch) of each "resource: verb verb ..." line of $1;
# a resource left with none is left out.
awk -F': *' '{
    out = ""
    n = split($2, verbs, " ")
    for (i = 1; i <= n; i++)
        if (verbs[i] == "get" || verbs[i] == "list" || verbs[i] == "watch")
            out = out " " verbs[i]
    if (out != "") print $1 ":" out
}' "$1"
