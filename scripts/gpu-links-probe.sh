#!/usr/bin/env bash
# shellcheck disable=SC2317  # cleanup runs from the trap, tcp_across through check
# Whether this machine can emulate hosts joined by shaped links, as `exdyna compare` builds them
# (src/exdyna/eval/hosts.cpp): two network namespaces, a veth pair between them, a tbf rate limit
# and a netem delay on it, and a TCP connection across. A few seconds; run it before a race on a
# borrowed machine (scripts/gpu-race-links.sh does).
#
#   bash scripts/gpu-links-probe.sh [PYTHON]
#
# PYTHON (optional): an interpreter with torch, to check that a process inside a namespace still
# sees the GPU (`ip netns exec` remounts /sys). Where the namespaces are refused, it also checks
# whether `tc` may shape the loopback device (a qdisc added to lo and removed at once): then the
# ranks could share one shaped link, which `exdyna compare` does not build.
#
# Prints one "links-probe: <check>: yes|no|skipped (...)" line per check, a failing check with
# the command and what it printed, and last "links-probe: emulated links: yes" or
# "links-probe: emulated links: no: <the first failing command>: <its error>". Exit 0 when
# namespaces, veth and tbf work (netem and the GPU inside a namespace are reported, not
# required: compare falls back to tbf alone), 1 otherwise. Leaves nothing behind.
set -u
PY=${1:-}
TAG=exdprobe$$
NS_A=$TAG-a
NS_B=$TAG-b
FIRST_FAIL=""
LO_SHAPED=0

cleanup() {
  ip netns delete "$NS_A" 2>/dev/null
  ip netns delete "$NS_B" 2>/dev/null
  if [ "$LO_SHAPED" = 1 ]; then tc qdisc del dev lo root 2>/dev/null; fi
}
trap cleanup EXIT

# check NAME CMD...: runs CMD (CHECK_T seconds at most, default 10), prints yes or no with the command and its error;
# returns CMD's status. The first failure is kept for the last line.
check() {
  local name=$1 out rc
  shift
  if declare -F "$1" >/dev/null; then
    out=$("$@" 2>&1) # a function of this script: its own commands have timeouts
  else
    out=$(timeout "${CHECK_T:-10}" "$@" 2>&1)
  fi
  rc=$?
  if [ "$rc" = 0 ]; then
    echo "links-probe: $name: yes"
    return 0
  fi
  out=$(echo "$out" | tr '\n' ' ' | cut -c1-300)
  echo "links-probe: $name: no (\`$*\` exit $rc: $out)"
  [ -n "$FIRST_FAIL" ] || FIRST_FAIL="\`$*\`: $out"
  return "$rc"
}

# A listener in namespace b and a client in namespace a: bytes cross the shaped veth pair.
tcp_across() {
  local py=${PY:-python3}
  ip netns exec "$NS_B" "$py" -c '
import socket
s = socket.socket(); s.bind(("10.213.254.2", 29599)); s.listen(1); s.settimeout(5)
c, _ = s.accept(); assert c.recv(5) == b"probe"' &
  local server=$!
  sleep 0.5
  ip netns exec "$NS_A" "$py" -c '
import socket
socket.create_connection(("10.213.254.2", 29599), timeout=5).sendall(b"probe")'
  local rc=$?
  wait "$server" || rc=1
  return "$rc"
}

# The hosts' part of hosts.cpp in small: two namespaces, a veth pair, addresses, links up, tbf.
build_links() {
  check "network namespaces" ip netns add "$NS_A" || return 1
  check "second namespace" ip netns add "$NS_B" || return 1
  check "veth pair" ip -n "$NS_A" link add eth0 type veth peer name eth0 netns "$NS_B" || return 1
  local ns
  for ns in "$NS_A" "$NS_B"; do
    local ip=10.213.254.1
    [ "$ns" = "$NS_B" ] && ip=10.213.254.2
    check "address in $ns" ip -n "$ns" addr add "$ip/24" dev eth0 || return 1
    check "link up in $ns" ip -n "$ns" link set eth0 up || return 1
    check "loopback up in $ns" ip -n "$ns" link set lo up || return 1
  done
  check "tc tbf (rate)" tc -n "$NS_A" qdisc add dev eth0 root tbf rate 1gbit burst 131072 latency 50ms
}

echo "links-probe: user $(id -un) (uid $(id -u)); ip: $(command -v ip || echo none); tc: $(command -v tc || echo none)"
links=0
if build_links; then
  links=1
  check "tc netem (delay)" tc -n "$NS_B" qdisc add dev eth0 root netem delay 50us rate 1gbit limit 100000 ||
    echo "links-probe: (without netem compare shapes the rate with tbf and emulates no delay)"
  check "tcp across the link" tcp_across || links=0
  if [ -n "$PY" ]; then
    # torch's import and the driver's start take seconds
    CHECK_T=60 check "GPU inside a namespace" ip netns exec "$NS_A" "$PY" -c \
      'import sys, torch; ok = torch.cuda.is_available(); print("cuda", ok); sys.exit(not ok)'
  else
    echo "links-probe: GPU inside a namespace: skipped (no PYTHON given)"
  fi
elif check "tc on the loopback" tc qdisc add dev lo root tbf rate 10gbit burst 1250000 latency 50ms; then
  # The smaller fallback: one shaped loopback that every rank would share.
  LO_SHAPED=1
fi
if [ "$links" = 1 ]; then
  echo "links-probe: emulated links: yes"
  exit 0
fi
echo "links-probe: emulated links: no: ${FIRST_FAIL:-(a check above)}"
exit 1
