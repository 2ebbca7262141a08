#!/usr/bin/env bash
# Session 2026-11-29c, call 7: the final tree: build and the full self-test.
set -u
O=$OUT/c7; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1 || { tail -50 $O/checks/build.log > $O/buildfail.txt; cd $OUT; tar czf c7.tgz c7; exit 1; }
echo "build $((SECONDS-t0)) s" >> $O/times.txt
build/gpu/app/cli/tandem-cli selftest --device cuda --fixtures tests/fixtures --json $O/selftest.json > $O/selftest.log 2>&1; echo "selftest rc $? $((SECONDS-t0)) s" >> $O/times.txt
tail -3 $O/selftest.log >> $O/times.txt
cd $OUT && tar czf c7.tgz c7 && rm -rf c7
