// Network faults on the emulated hosts (eval/hosts.hpp), for the reliability tests. This kernel has
// no sch_netem and no tc actions, so the faults are nftables rules in a host's namespace, on its
// receive path: random packet loss (`numgen random`), a blackout that drops everything for a while
// (how a 200 ms delay spike looks to TCP: nothing arrives, then it all does, after
// retransmission), and a cut link (the host's eth0 down). Every call names the command that failed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace exdyna::eval {

// Empty when nftables can filter inside a fresh namespace here, else one line saying why not.
std::string faults_unavailable_reason();

// Drops `pct` percent (0 < pct < 100, resolution 0.01 %) of the packets arriving at host `ns`.
void add_loss(const std::string& ns, double pct);
// Drops every packet arriving at host `ns` for `length`, then lets them through again (blocking).
// Returns how many packets it dropped.
long blackout(const std::string& ns, std::chrono::milliseconds length);
// Packets the loss rules of host `ns` have dropped so far (0 without rules).
long dropped_packets(const std::string& ns);
// Removes this file's rules from host `ns` (idempotent).
void clear_faults(const std::string& ns);
// Takes host `ns`'s link down: its peers see silence, it sees an unreachable network.
void cut_link(const std::string& ns);

}  // namespace exdyna::eval
