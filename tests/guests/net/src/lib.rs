//! A transform that opens a TCP connection, so its component imports
//! `wasi:sockets`: Sluice must refuse to load it.

use sluice_sdk::guest::{Config, Transform};
use sluice_sdk::{ConnectError, Record};

struct Net;

impl Transform for Net {
    fn configure(_config: Config) -> Result<Self, ConnectError> {
        Ok(Net)
    }

    fn transform(&mut self, record: Record) -> Result<Vec<Record>, ConnectError> {
        std::net::TcpStream::connect("127.0.0.1:9")
            .map_err(|e| ConnectError::data(e.to_string()))?;
        Ok(vec![record])
    }
}

sluice_sdk::export_transform!(Net);
