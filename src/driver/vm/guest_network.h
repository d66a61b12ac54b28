// A vm sandbox's network: a tap device inside the sandbox's network slot
// (the namespace the net layer made, with `eth0` wired to the host and the
// slot's policy enforced on the host side, as for a jail sandbox), and
// that namespace turned into a small router for the guest.
//
//   guest eth0 192.0.0.2/30 ──virtio-net── tap0 192.0.0.1/30 │ slot netns │ eth0 <slot .2> ── host
//
// Every guest has the same addresses (192.0.0.0/29 is reserved for such
// internal links, RFC 7335): nothing in a guest depends on its slot, so a
// guest booted once is restored into any slot, and a fork child keeps
// working in its own. The slot's namespace masquerades what the guest
// sends out of eth0 to the slot's address, so the host sees the guest
// exactly as it sees a jail sandbox of that slot: same policy chain, same
// DNS proxy client, same counters. The guest's resolver is 192.0.0.1,
// forwarded to the slot's DNS server (the host's end).
//
// What the guest, root in its kernel, could try from there is filtered in
// the slot's namespace (GuestRules): a source address other than its own
// is dropped (it could otherwise pass as another sandbox to the DNS proxy
// or the host's rules), nothing reaches the namespace itself except
// replies and DNS, and no IPv6 is forwarded at all.
//
// QEMU never opens the tap: hutchd opens it in the namespace and passes the
// fd, so QEMU keeps running in its own empty namespace without
// CAP_NET_ADMIN. The tap has no persist flag: it goes away with QEMU.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace hutch::vm {

namespace asio = boost::asio;

inline constexpr const char* kGuestAddress = "192.0.0.2";
inline constexpr const char* kGuestGateway = "192.0.0.1";  // tap0 in the slot's namespace
inline constexpr const char* kGuestMac = "52:54:00:c0:00:02";
inline constexpr const char* kTapName = "tap0";

// A tap device (vnet header, no packet info) named tap0 in the namespace
// bind-mounted at `netns_path`, with a fixed MAC (a restored guest's ARP
// cache names it), 192.0.0.1/30 and up; IPv6 off on it and IPv4
// forwarding on in the namespace (so: after ApplyGuestRules). With an empty path the tap is made in
// a new namespace of its own that lives only as long as the fd (a boot snapshot's base VM: a NIC
// with nothing behind it). The fd is close-on- exec; hand it to QEMU through QemuLaunch::pass_fds.
Result<UniqueFd> OpenGuestTap(const std::string& netns_path);

// The nftables script for the slot's namespace: masquerade out of eth0,
// DNS to 192.0.0.1 forwarded to `dns_server`, the guest's spoofed
// sources, new connections into the namespace and all IPv6 dropped.
std::string GuestRules(const std::string& dns_server);

// Loads GuestRules into the namespace at `netns_path` (nft run there
// through nsenter). Before OpenGuestTap turns forwarding on: the
// namespace never forwards unfiltered. The rules name the tap, which need
// not exist yet.
asio::awaitable<Status> ApplyGuestRules(const std::string& netns_path,
                                        const std::string& dns_server);

}  // namespace hutch::vm
