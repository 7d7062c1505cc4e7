"""Which security group rules Calico cannot express, and why.

The same checks, in the same order and with the same words, as calico-neutron's translation
(crates/openstack/src/rule.rs and the model's rule checks it calls); the test
crates/neutron/tests/security_rules.rs runs both over one table of rules and fails when they
disagree. (A prefix of the other IP version, which the translation refuses too, Neutron refuses
itself before the driver is asked.) No Neutron imports here: the test loads this file alone.
"""

# neutron_lib's IP_PROTOCOL_MAP (and rule.rs's NEUTRON_PROTOCOLS).
PROTOCOLS = {
    'ah': 51, 'dccp': 33, 'egp': 8, 'esp': 50, 'gre': 47, 'hopopt': 0,
    'icmp': 1, 'icmpv6': 58, 'igmp': 2, 'ip': 0, 'ipip': 4, 'ipv6-encap': 41,
    'ipv6-frag': 44, 'ipv6-icmp': 58, 'ipv6-nonxt': 59, 'ipv6-opts': 60,
    'ipv6-route': 43, 'ospf': 89, 'pgm': 113, 'rsvp': 46, 'sctp': 132,
    'tcp': 6, 'udp': 17, 'udplite': 136, 'vrrp': 112,
}
# Protocols whose port ranges Calico matches (tcp, udp, sctp, udplite).
PORT_PROTOCOLS = (6, 17, 132, 136)
ICMP = (1, 58)


def reason(rule):
    """Why Calico cannot express `rule` (a dict of Neutron's fields), or None."""
    ethertype = rule.get('ethertype') or 'IPv4'
    text = rule.get('protocol')
    number = None
    if text is not None and text != '':
        text = str(text)
        number = PROTOCOLS.get(text)
        if number is None:
            if not text.isdigit() or int(text) > 255:
                return ('protocol "%s": neither a protocol name Neutron knows '
                        'nor a number 0-255' % text)
            number = int(text)
        if number == 0:
            return ('protocol "%s" (0): Calico cannot match protocol 0'
                    % text)
        if number == 58 and ethertype == 'IPv4':
            return 'protocol "%s" (ICMPv6) in an IPv4 rule' % text
    low, high = rule.get('port_range_min'), rule.get('port_range_max')
    icmp_type = None
    if low is not None or high is not None:
        if number is None:
            return 'a port range without a protocol'
        if number in ICMP:
            if low is None:
                return ('port_range_max (ICMP code) without port_range_min '
                        '(type)')
            for field, value in (('port_range_min', low),
                                 ('port_range_max', high)):
                if value is not None and int(value) > 255:
                    return ('%s %d: an ICMP type or code is 0-255'
                            % (field, int(value)))
            icmp_type = int(low)
        elif number in PORT_PROTOCOLS:
            for field, value in (('port_range_min', low),
                                 ('port_range_max', high)):
                if value is None:
                    return ('%s is missing: a port range needs both ends'
                            % field)
                if int(value) > 65535:
                    return '%s %d: a port is 0-65535' % (field, int(value))
            if int(low) > int(high):
                return ('invalid port range "%d:%d": first port is above last'
                        % (int(low), int(high)))
        else:
            return ('a port range with protocol "%s" (%d): Calico matches '
                    'ports of tcp, udp, sctp and udplite only'
                    % (text, number))
    group = rule.get('remote_address_group_id')
    if group:
        return ('remote_address_group_id %s: address groups are not '
                'supported' % group)
    if icmp_type == 255:
        return 'icmp_type: icmp type 255 is out of range 0-254'
    return None


def refusal(rule):
    """The message a refused rule's client sees, or None."""
    why = reason(rule)
    if why is None:
        return None
    return ('Calico cannot express this security group rule: %s (calico-neutron '
            'would leave it out of every endpoint\'s policy)' % why)
