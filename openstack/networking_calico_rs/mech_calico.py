"""The ML2 mechanism driver `calico_rs`.

It binds every port on every host (every compute host is taken to run Calico: Felix and BIRD)
whose segment is `local` or `flat` (Calico routes, it has no L2 segmentation), as
`vif_type: tap` with L3 connectivity and status ACTIVE: Nova then plugs an unbridged TAP
named `tap` + the first 11 characters of the port id, which Felix routes to.

And it tells calico-neutron what changed, as each change commits: the post-commit hooks of
ports and subnets, and Neutron's callbacks for security groups and their rules, send one
datagram `{"kind": "port"|"subnet"|"security_group", "id": ...}` to the unix socket
`[calico_rs] notify_socket`. calico-neutron then reads that one object from Neutron's API and
writes its keys; nothing in a notification is trusted but the kind and the id. Sending never
blocks and never fails a request: a notification that cannot be sent (calico-neutron not
running, its queue full) is dropped, with a warning at most once a minute, and calico-neutron's
periodic resync picks the change up. No RPC, no database, no etcd here.

A security group rule Calico cannot express (`rules.reason`: protocol 0, a port range of a
protocol other than tcp/udp/sctp/udplite, ICMP type 255, a remote address group, ...) is
refused before it is committed: the BEFORE_CREATE callback raises, and Neutron answers the
client 409 Conflict with the reason (nothing is created); unless `[calico_rs]
refuse_inexpressible_rules = false`.
"""

import json
import socket
import time

from neutron_lib.api.definitions import portbindings
from neutron_lib.callbacks import events
from neutron_lib.callbacks import registry
from neutron_lib.callbacks import resources
from neutron_lib import constants
from neutron_lib.plugins.ml2 import api
from oslo_config import cfg
from oslo_log import log

from networking_calico_rs import rules

LOG = log.getLogger(__name__)

VIF_TYPE_TAP = 'tap'
BINDABLE_NETWORK_TYPES = ('local', 'flat')
DEFAULT_SOCKET = '/run/calico/neutron-notify.sock'
WARN_EVERY_SECONDS = 60

OPTS = [
    cfg.StrOpt('notify_socket', default=DEFAULT_SOCKET,
               help='The unix datagram socket calico-neutron listens on '
                    '(calico-neutron --notify-socket); empty: no notifications, '
                    'calico-neutron learns of changes at its resync only.'),
    cfg.BoolOpt('refuse_inexpressible_rules', default=True,
                help='Refuse (409) a new security group rule Calico cannot '
                     'express; false: accept it, and calico-neutron leaves it '
                     'out with a warning naming it.'),
]
cfg.CONF.register_opts(OPTS, 'calico_rs')


class Notifier(object):
    """Sends change notifications without ever blocking a request."""

    def __init__(self, path):
        self.path = path
        self.sock = None
        self.dropped = 0
        self.warned_at = 0.0

    def send(self, kind, object_id):
        if not self.path or not object_id:
            return
        message = json.dumps({'kind': kind, 'id': object_id}).encode()
        try:
            if self.sock is None:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self.sock.setblocking(False)
            self.sock.sendto(message, self.path)
        except OSError as error:
            self.dropped += 1
            now = time.monotonic()
            if now - self.warned_at >= WARN_EVERY_SECONDS:
                self.warned_at = now
                LOG.warning('calico_rs: cannot notify calico-neutron at %s '
                            '(%s); %d notification(s) dropped so far, the '
                            'resync will pick the changes up',
                            self.path, error, self.dropped)


class InexpressibleRule(Exception):
    """A rule Calico cannot express; Neutron turns it into a 409 with this text."""


class CalicoMechanismDriver(api.MechanismDriver):
    """Binds ports as TAP interfaces for Calico; notifies calico-neutron."""

    def initialize(self):
        path = cfg.CONF.calico_rs.notify_socket
        self.notifier = Notifier(path)
        LOG.info('calico_rs mechanism driver: binding ports as %s; '
                 'notifying calico-neutron at %s', VIF_TYPE_TAP,
                 path or '(nowhere: notify_socket is empty)')
        for event in (events.AFTER_CREATE, events.AFTER_UPDATE,
                      events.AFTER_DELETE):
            registry.subscribe(self._security_group, resources.SECURITY_GROUP,
                               event)
        registry.subscribe(self._refuse_inexpressible_rule,
                           resources.SECURITY_GROUP_RULE, events.BEFORE_CREATE)
        for event in (events.AFTER_CREATE, events.AFTER_DELETE):
            registry.subscribe(self._security_group_rule,
                               resources.SECURITY_GROUP_RULE, event)

    @property
    def connectivity(self):
        return portbindings.CONNECTIVITY_L3

    def bind_port(self, context):
        port = context.current
        for segment in context.segments_to_bind:
            network_type = segment[api.NETWORK_TYPE]
            if network_type not in BINDABLE_NETWORK_TYPES:
                LOG.debug('port %s: segment %s is %s, not bound by Calico',
                          port['id'], segment[api.ID], network_type)
                continue
            context.set_binding(segment[api.ID], VIF_TYPE_TAP,
                                {portbindings.CAP_PORT_FILTER: True},
                                status=constants.PORT_STATUS_ACTIVE)
            LOG.info('port %s bound on host %s as %s', port['id'],
                     context.host, VIF_TYPE_TAP)
            return
        LOG.warning('port %s on host %s: no local or flat segment to bind',
                    port['id'], context.host)

    # Ports: created, changed (binding, groups, addresses, admin state), deleted.
    def create_port_postcommit(self, context):
        self.notifier.send('port', context.current['id'])

    def update_port_postcommit(self, context):
        self.notifier.send('port', context.current['id'])

    def delete_port_postcommit(self, context):
        self.notifier.send('port', context.current['id'])

    # Subnets: a gateway is in the endpoints of the subnet's ports.
    def create_subnet_postcommit(self, context):
        self.notifier.send('subnet', context.current['id'])

    def update_subnet_postcommit(self, context):
        self.notifier.send('subnet', context.current['id'])

    def delete_subnet_postcommit(self, context):
        self.notifier.send('subnet', context.current['id'])

    # Security groups and rules: Neutron's callbacks (ML2 has no hooks for them).
    def _security_group(self, resource, event, trigger, payload=None):
        self.notifier.send('security_group', payload.resource_id)

    def _refuse_inexpressible_rule(self, resource, event, trigger,
                                   payload=None):
        rule = payload.latest_state if payload else None
        message = rules.refusal(rule or {})
        if not message:
            return
        if not cfg.CONF.calico_rs.refuse_inexpressible_rules:
            LOG.warning('security group rule accepted '
                        '(refuse_inexpressible_rules is false): %s', message)
            return
        LOG.info('security group rule refused: %s', message)
        raise InexpressibleRule(message)

    def _security_group_rule(self, resource, event, trigger, payload=None):
        if event == events.AFTER_CREATE:
            group = payload.latest_state.get('security_group_id')
        else:
            group = (payload.metadata or {}).get('security_group_id')
        self.notifier.send('security_group', group)
