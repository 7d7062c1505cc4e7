//! The IPAM driver's address calls on top of Calico IPAM: each address assigned from the
//! host's affine blocks under a handle of its own (`names::new_handle`), released by address.

use std::collections::BTreeMap;
use std::net::IpAddr;

use calico_ipam::{AssignRequest, IpamError};
use calico_model::IpVersion;

use crate::driver::Driver;
use crate::error::DriverError;
use crate::names::{self, HANDLE_PREFIX};
use crate::pool::{AddressWanted, PoolId};

impl Driver {
    /// `RequestAddress`: the address, with the prefix length to answer with.
    pub(crate) async fn request_address(
        &self,
        wanted: AddressWanted,
    ) -> Result<String, DriverError> {
        match wanted {
            AddressWanted::Gateway(pool) => Ok(crate::pool::everything(pool.version()).to_owned()),
            AddressWanted::Any(pool) => self.assign_any(pool).await,
            AddressWanted::Exactly(pool, ip) => self.assign_exactly(pool, ip).await,
        }
    }

    fn attributes(pool: PoolId) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("orchestrator".to_owned(), names::ORCHESTRATOR.to_owned()),
            ("pool".to_owned(), pool.to_string()),
        ])
    }

    async fn assign_any(&self, pool: PoolId) -> Result<String, DriverError> {
        let version = pool.version();
        let mut request = AssignRequest {
            host: self.hostname.clone(),
            handle: names::new_handle(&self.hostname),
            attributes: Self::attributes(pool),
            ..AssignRequest::default()
        };
        let from = match pool {
            PoolId::Subnet(net) => self.pool_holding(net).await?.into_iter().collect(),
            PoolId::Any(_) => Vec::new(),
        };
        match version {
            IpVersion::V4 => (request.ipv4, request.ipv4_pools) = (1, from),
            IpVersion::V6 => (request.ipv6, request.ipv6_pools) = (1, from),
        }
        let assigned = self.ipam.auto_assign(&request).await?;
        let ip = *assigned
            .ipv4
            .iter()
            .chain(&assigned.ipv6)
            .next()
            .ok_or_else(|| {
                DriverError::invalid("PoolID", pool.to_string(), "IPAM assigned no address")
            })?;
        if let PoolId::Subnet(net) = pool
            && !net.contains(&ip)
        {
            self.ipam.release_ips(&[ip]).await?;
            return Err(DriverError::invalid(
                "PoolID",
                net.to_string(),
                "--subnet is narrower than its Calico pool and the host's block gave an address \
                 outside it: use the pool's whole CIDR as --subnet, or give --ip",
            ));
        }
        Ok(crate::pool::host_prefix(ip))
    }

    /// The enabled Calico pool holding a `--subnet`.
    async fn pool_holding(&self, net: ipnet::IpNet) -> Result<Option<ipnet::IpNet>, DriverError> {
        let pools = self.pools().await?;
        Ok(pools
            .iter()
            .filter(|p| p.assigns_addresses() && p.cidr.contains(&net))
            .map(|p| p.cidr)
            .next())
    }

    async fn assign_exactly(&self, pool: PoolId, ip: IpAddr) -> Result<String, DriverError> {
        let handle = names::new_handle(&self.hostname);
        match self
            .ipam
            .assign_ip(ip, &handle, &Self::attributes(pool), &self.hostname)
            .await
        {
            Ok(()) => Ok(crate::pool::host_prefix(ip)),
            Err(e @ IpamError::InUse { .. }) => Err(DriverError::invalid(
                "Address",
                ip.to_string(),
                format!("address already in use: {e}"),
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// `ReleaseAddress`: the address, if this driver assigned it. The unspecified address
    /// (the gateway `RequestPool` declared) and addresses of other handles are left alone.
    pub(crate) async fn release_address(
        &self,
        pool: PoolId,
        text: &str,
    ) -> Result<(), DriverError> {
        let ip: IpAddr = text
            .parse()
            .map_err(|_| DriverError::invalid("Address", text, "not an IP address"))?;
        if ip.is_unspecified() {
            return Ok(());
        }
        crate::pool::check_in_pool(pool, ip, "Address")?;
        self.release_ours(&[ip]).await?;
        Ok(())
    }

    /// Releases the addresses one of this driver's handles holds; others' are left alone
    /// (logged). Returns those released.
    pub(crate) async fn release_ours(&self, ips: &[IpAddr]) -> Result<Vec<IpAddr>, DriverError> {
        let mut ours = Vec::new();
        for &ip in ips {
            match self.ipam.ip_info(ip).await?.and_then(|a| a.primary) {
                Some(handle) if handle.starts_with(HANDLE_PREFIX) => ours.push(ip),
                Some(other) => tracing::warn!("not releasing {ip}: it belongs to handle {other}"),
                None => tracing::info!("{ip} was not assigned: nothing to release"),
            }
        }
        if !ours.is_empty() {
            self.ipam.release_ips(&ours).await?;
        }
        Ok(ours)
    }
}
