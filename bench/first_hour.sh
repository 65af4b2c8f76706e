#!/usr/bin/env bash
# Run by hand: bash bench/first_hour.sh (clones this repository, or CLONE_FROM). Its output on the
# 2-core dev VM is in bench/results/first-hour-cpu-vm.log.
# The new-user path and the infinite-loop case, end to end, on a fresh clone.
set -uo pipefail
mkdir -p /tmp/walk
rm -rf /tmp/fresh && git clone -q "${CLONE_FROM:-$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)}" /tmp/fresh && cd /tmp/fresh
export GPUARENA_PORT=8011
(bash scripts/serve.sh > /tmp/walk/serve.log 2>&1 &)
for i in $(seq 1 300); do curl -sf http://127.0.0.1:8011/api/health >/dev/null && break; sleep 1; done
echo "== serve.sh output (head)"; grep -v "^INFO" /tmp/walk/serve.log | grep -iv "pip\|already satisfied" | head -12
. .venv/bin/activate
S=http://127.0.0.1:8011
echo "== gpuarena users add alice / bob"
gpuarena users add alice 2>&1 | tee /tmp/walk/alice.txt; A=$(tail -1 /tmp/walk/alice.txt)
gpuarena users add bob 2>&1 | tee /tmp/walk/bob.txt | tail -1 >/dev/null; B=$(tail -1 /tmp/walk/bob.txt)
echo "== alice's token works against the server she just started"
curl -s -H "Authorization: Bearer $A" $S/api/me; echo
printf 'def solve(x):\n    while True:\n        pass\n' > loop.py
echo "== alice submits an infinite loop in test mode (output not a terminal)"
(gpuarena submit level1/softmax loop.py --server $S --token $A --device cpu --mode test > /tmp/walk/loop-submit.txt 2>&1 &)
sleep 4
LOOP=$(curl -s -H "Authorization: Bearer $A" "$S/api/submissions?user=alice" | python3 -c "import json,sys; print(min(s['id'] for s in json.load(sys.stdin)))")
echo "loop submission: $LOOP"
echo "== alice queues more (limit 5 in flight)"
for i in 1 2 3 4 5; do
  curl -s -o /dev/null -w "alice submit $i: HTTP %{http_code}\n" -H "Authorization: Bearer $A" -F problem=level1/softmax -F device_kind=cpu -F mode=test -F file=@examples/softmax/pytorch.py $S/api/submissions/upload 2>/dev/null || true
done
gpuarena submit level1/softmax examples/softmax/pytorch.py --server $S --token $A --device cpu --mode test > /tmp/walk/alice-6th.txt 2>&1; echo "alice 6th through the CLI (exit $?):"; tail -2 /tmp/walk/alice-6th.txt
echo "== bob submits one: fair order puts it before alice's queued ones"
(gpuarena submit level1/softmax examples/softmax/pytorch.py --server $S --token $B --device cpu --mode test > /tmp/walk/bob-submit.txt 2>&1 &)
sleep 4
for id in 2 3 4 5 6; do curl -s $S/api/submissions/$id | python3 -c "
import json,sys; s=json.load(sys.stdin); print(' ', s['id'], s['user'], s['status'], 'queue position', s.get('queue_position'))"; done
echo "== the loop's page shows its time limit; alice cancels it"
curl -s -H "Authorization: Bearer $A" $S/api/submissions/$LOOP | python3 -c "import json,sys; d=json.load(sys.stdin); print(' ', d['id'], d['status'])"
gpuarena cancel $LOOP --server $S --token $A
sleep 8
echo "== what the submit (not a terminal) printed"; cat /tmp/walk/loop-submit.txt; echo "== bob's submit printed"; cat /tmp/walk/bob-submit.txt
echo "== the order things finished in"
for i in $(seq 1 120); do
  left=$(curl -s -H "Authorization: Bearer $A" "$S/api/submissions?status=QUEUED" | python3 -c "import json,sys; print(len(json.load(sys.stdin)))")
  [ "$left" = 0 ] && break; sleep 2
done
sleep 15
curl -s -H "Authorization: Bearer $A" "$S/api/submissions" | python3 -c "
import json,sys
for s in sorted(json.load(sys.stdin), key=lambda s: (s.get('finished_at') or 'z')): print(' ', s['id'], s['user'], s['status'], s.get('finished_at'), (s.get('reason') or '')[:80])"
pkill -f "gpuarena serve --host 127.0.0.1 --port 8011"
