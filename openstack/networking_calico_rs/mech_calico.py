"""The ML2 mechanism driver `calico_rs`.

It binds every port on every host (every compute host is taken to run Calico: Felix and BIRD)
whose segment is `local` or `flat` (Calico routes, it has no L2 segmentation), as
`vif_type: tap` with L3 connectivity and status ACTIVE: Nova then plugs an unbridged TAP
named `tap` + the first 11 characters of the port id, which Felix routes to. Nothing else: no
RPC, no database, no etcd; calico-neutron reads Neutron's API for the rest.
"""

from neutron_lib.api.definitions import portbindings
from neutron_lib import constants
from neutron_lib.plugins.ml2 import api
from oslo_log import log

LOG = log.getLogger(__name__)

VIF_TYPE_TAP = 'tap'
BINDABLE_NETWORK_TYPES = ('local', 'flat')


class CalicoMechanismDriver(api.MechanismDriver):
    """Binds ports as TAP interfaces for Calico."""

    def initialize(self):
        LOG.info('calico_rs mechanism driver: binding ports as %s', VIF_TYPE_TAP)

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
