// SPDX-License-Identifier: Apache-2.0
//
// Stateless IPv4 <-> IPv6 translation (RFC 7915, SIIT) for one address space, at tc on the host
// side of one workload's veth. Two programs, one per direction:
//
//   v4to6  tc ingress (packets from the workload): IPv4 -> IPv6, both addresses mapped into the
//          space's /96 (<prefix>:<ID>::W.X.Y.Z); the kernel then routes the IPv6 packet.
//   v6to4  tc egress (packets routed to the workload): IPv6 -> IPv4, only when both addresses
//          are in the space's /96; anything else is dropped, so no packet of another space (or
//          of the shared space) ever reaches the workload.
//
// The space's /96 is three 32-bit immediates that the Rust side patches into the object before
// `tc` loads it (see src/object.rs): one object file per interface, no maps, no state.
//
// Both addresses gain the same 96 bits, so the TCP/UDP checksum changes by a per-space
// constant: one incremental update (bpf_l4_csum_replace with the pseudo-header flag), never a
// pass over the payload. ICMP echo gains (or loses) the IPv6 pseudo-header and a type change.
//
// Not handled yet (dropped): IPv4 options, fragments (MF or offset set) and IPv6 fragment or
// other extension headers, ICMP/ICMPv6 errors, UDP without checksum.

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>

#ifndef IPPROTO_ICMPV6
#define IPPROTO_ICMPV6 58
#endif

#define SEC(name) __attribute__((section(name), used))
#define INLINE static inline __attribute__((always_inline))

static long (*bpf_skb_load_bytes)(const void *skb, __u32 off, void *to, __u32 len) =
	(void *)BPF_FUNC_skb_load_bytes;
static long (*bpf_skb_store_bytes)(void *skb, __u32 off, const void *from, __u32 len,
				   __u64 flags) = (void *)BPF_FUNC_skb_store_bytes;
static long (*bpf_l4_csum_replace)(void *skb, __u32 off, __u64 from, __u64 to,
				   __u64 flags) = (void *)BPF_FUNC_l4_csum_replace;
static __s64 (*bpf_csum_diff)(const void *from, __u32 from_size, const void *to, __u32 to_size,
			      __u32 seed) = (void *)BPF_FUNC_csum_diff;
static long (*bpf_skb_change_proto)(void *skb, __be16 proto, __u64 flags) =
	(void *)BPF_FUNC_skb_change_proto;

#define bswap16(x) __builtin_bswap16(x)
#define bswap32(x) __builtin_bswap32(x)

// The space's /96 in network byte order. Marker immediates, replaced per interface.
#define SPACE_W0 0x7a510c01
#define SPACE_W1 0x7a510c02
#define SPACE_W2 0x7a510c03
#define STR2(x) #x
#define STR(x) STR2(x)
#define IMM(name)                                                          \
	({                                                                 \
		__u64 v;                                                   \
		asm volatile("%0 = " STR(name) : "=r"(v));                 \
		(__u32)v;                                                  \
	})

struct ip4 {
	__u8 vihl, tos;
	__be16 tot_len, id, frag;
	__u8 ttl, proto;
	__be16 csum;
	__be32 saddr, daddr;
};

struct ip6 {
	__be32 vtcflow;
	__be16 plen;
	__u8 nexthdr, hlim;
	__be32 saddr[4], daddr[4];
};

#define ETH_LEN 14
#define IP4_LEN 20
#define IP6_LEN 40
#define TCP_CSUM 16
#define UDP_CSUM 6
#define ICMP_CSUM 2

INLINE __u16 csum_fold(__s64 sum)
{
	__u64 s = (__u32)sum;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

// The offset of the transport checksum for `proto` (IPv4 numbering), or 0 when the packet is
// one this translator does not handle.
INLINE __u32 csum_offset(__u8 proto)
{
	switch (proto) {
	case IPPROTO_TCP:
		return TCP_CSUM;
	case IPPROTO_UDP:
		return UDP_CSUM;
	case IPPROTO_ICMP:
		return ICMP_CSUM;
	}
	return 0;
}

// The IPv6 pseudo-header's sum for ICMPv6 (addresses, upper-layer length, next header 58).
INLINE __s64 icmp6_pseudo(const struct ip6 *ip6)
{
	__be32 tail[2] = {bswap32((__u32)bswap16(ip6->plen)), bswap32(IPPROTO_ICMPV6)};
	__s64 sum = bpf_csum_diff(0, 0, (void *)ip6->saddr, 32, 0);
	return bpf_csum_diff(0, 0, tail, sizeof(tail), (__u32)sum);
}

SEC("tc/v4to6")
int v4to6(struct __sk_buff *skb)
{
	__be16 ethertype;
	struct ip4 ip4;
	__u8 icmp[2] = {0, 0};

	if (bpf_skb_load_bytes(skb, 12, &ethertype, 2) < 0 || ethertype != bswap16(ETH_P_IP))
		return TC_ACT_OK; // ARP and anything else the workload's stack needs
	if (bpf_skb_load_bytes(skb, ETH_LEN, &ip4, sizeof(ip4)) < 0)
		return TC_ACT_SHOT;
	if (ip4.vihl != 0x45 || (ip4.frag & bswap16(0x3fff)) != 0)
		return TC_ACT_SHOT; // options, fragments: not translated yet
	__u32 csum_off = csum_offset(ip4.proto);
	if (csum_off == 0)
		return TC_ACT_SHOT;
	if (ip4.proto == IPPROTO_ICMP) {
		if (bpf_skb_load_bytes(skb, ETH_LEN + IP4_LEN, icmp, 2) < 0)
			return TC_ACT_SHOT;
		if ((icmp[0] != 8 && icmp[0] != 0) || icmp[1] != 0)
			return TC_ACT_SHOT; // only echo request/reply
	}
	if (ip4.proto == IPPROTO_UDP) {
		__be16 udp_csum;
		if (bpf_skb_load_bytes(skb, ETH_LEN + IP4_LEN + UDP_CSUM, &udp_csum, 2) < 0 ||
		    udp_csum == 0)
			return TC_ACT_SHOT; // IPv6 requires a UDP checksum; computing one is a payload pass
	}

	struct ip6 ip6 = {
		.vtcflow = bswap32(0x60000000u | ((__u32)ip4.tos << 20)),
		.plen = bswap16(bswap16(ip4.tot_len) - IP4_LEN),
		.nexthdr = ip4.proto == IPPROTO_ICMP ? IPPROTO_ICMPV6 : ip4.proto,
		.hlim = ip4.ttl,
	};
	ip6.saddr[0] = ip6.daddr[0] = IMM(SPACE_W0);
	ip6.saddr[1] = ip6.daddr[1] = IMM(SPACE_W1);
	ip6.saddr[2] = ip6.daddr[2] = IMM(SPACE_W2);
	ip6.saddr[3] = ip4.saddr;
	ip6.daddr[3] = ip4.daddr;

	if (bpf_skb_change_proto(skb, bswap16(ETH_P_IPV6), 0) < 0)
		return TC_ACT_SHOT;
	ethertype = bswap16(ETH_P_IPV6);
	if (bpf_skb_store_bytes(skb, 12, &ethertype, 2, 0) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_LEN, &ip6, sizeof(ip6), 0) < 0)
		return TC_ACT_SHOT;

	__u32 off = ETH_LEN + IP6_LEN + csum_off;
	if (ip4.proto == IPPROTO_ICMP) {
		__u8 type6[2] = {icmp[0] == 8 ? 128 : 129, 0};
		__u16 from = *(__u16 *)icmp, to = *(__u16 *)type6;
		if (bpf_skb_store_bytes(skb, ETH_LEN + IP6_LEN, type6, 1, 0) < 0 ||
		    bpf_l4_csum_replace(skb, off, from, to, 2) < 0 ||
		    bpf_l4_csum_replace(skb, off, 0, icmp6_pseudo(&ip6), 0) < 0)
			return TC_ACT_SHOT;
		return TC_ACT_OK;
	}
	__s64 diff = bpf_csum_diff(&ip4.saddr, 8, ip6.saddr, 32, 0);
	__u64 flags = BPF_F_PSEUDO_HDR | (ip4.proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0);
	if (bpf_l4_csum_replace(skb, off, 0, diff, flags) < 0)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

SEC("tc/v6to4")
int v6to4(struct __sk_buff *skb)
{
	__be16 ethertype;
	struct ip6 ip6;
	__u8 icmp[2] = {0, 0};

	if (bpf_skb_load_bytes(skb, 12, &ethertype, 2) < 0)
		return TC_ACT_SHOT;
	if (ethertype == bswap16(ETH_P_ARP))
		return TC_ACT_OK;
	if (ethertype != bswap16(ETH_P_IPV6))
		return TC_ACT_SHOT; // no untranslated IPv4 enters a private space
	if (bpf_skb_load_bytes(skb, ETH_LEN, &ip6, sizeof(ip6)) < 0)
		return TC_ACT_SHOT;
	__u32 w0 = IMM(SPACE_W0), w1 = IMM(SPACE_W1), w2 = IMM(SPACE_W2);
	if (ip6.saddr[0] != w0 || ip6.saddr[1] != w1 || ip6.saddr[2] != w2 ||
	    ip6.daddr[0] != w0 || ip6.daddr[1] != w1 || ip6.daddr[2] != w2)
		return TC_ACT_SHOT; // another space, the shared space, or link-local ND
	__u8 proto = ip6.nexthdr == IPPROTO_ICMPV6 ? IPPROTO_ICMP : ip6.nexthdr;
	if (ip6.nexthdr == IPPROTO_ICMP)
		return TC_ACT_SHOT; // ICMPv4 inside IPv6 is not a thing
	__u32 csum_off = csum_offset(proto);
	if (csum_off == 0)
		return TC_ACT_SHOT; // extension headers (fragments) and other protocols
	if (proto == IPPROTO_ICMP) {
		if (bpf_skb_load_bytes(skb, ETH_LEN + IP6_LEN, icmp, 2) < 0)
			return TC_ACT_SHOT;
		if ((icmp[0] != 128 && icmp[0] != 129) || icmp[1] != 0)
			return TC_ACT_SHOT;
	}

	__u32 vtcflow = bswap32(ip6.vtcflow);
	struct ip4 ip4 = {
		.vihl = 0x45,
		.tos = (__u8)(vtcflow >> 20),
		.tot_len = bswap16(bswap16(ip6.plen) + IP4_LEN),
		.id = 0,
		.frag = bswap16(0x4000), // DF: the path is IPv6, which never fragments in flight
		.ttl = ip6.hlim,
		.proto = proto,
		.saddr = ip6.saddr[3],
		.daddr = ip6.daddr[3],
	};
	ip4.csum = csum_fold(bpf_csum_diff(0, 0, &ip4, sizeof(ip4), 0));

	__s64 pseudo = proto == IPPROTO_ICMP ? icmp6_pseudo(&ip6) : 0;
	if (bpf_skb_change_proto(skb, bswap16(ETH_P_IP), 0) < 0)
		return TC_ACT_SHOT;
	ethertype = bswap16(ETH_P_IP);
	if (bpf_skb_store_bytes(skb, 12, &ethertype, 2, 0) < 0 ||
	    bpf_skb_store_bytes(skb, ETH_LEN, &ip4, sizeof(ip4), 0) < 0)
		return TC_ACT_SHOT;

	__u32 off = ETH_LEN + IP4_LEN + csum_off;
	if (proto == IPPROTO_ICMP) {
		__u8 type4[2] = {icmp[0] == 128 ? 8 : 0, 0};
		__u16 from = *(__u16 *)icmp, to = *(__u16 *)type4;
		if (bpf_skb_store_bytes(skb, ETH_LEN + IP4_LEN, type4, 1, 0) < 0 ||
		    bpf_l4_csum_replace(skb, off, from, to, 2) < 0 ||
		    bpf_l4_csum_replace(skb, off, 0, ~(__u32)pseudo, 0) < 0)
			return TC_ACT_SHOT;
		return TC_ACT_OK;
	}
	__s64 diff = bpf_csum_diff(ip6.saddr, 32, &ip4.saddr, 8, 0);
	__u64 flags = BPF_F_PSEUDO_HDR | (proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0);
	if (bpf_l4_csum_replace(skb, off, 0, diff, flags) < 0)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
