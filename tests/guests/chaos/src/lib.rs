//! A transform that misbehaves on demand, driven by each record's value:
//!
//! | value | behaviour |
//! |---|---|
//! | `trap` | panics (a trap) |
//! | `loop` | never returns |
//! | `bomb` | allocates until memory runs out |
//! | `read:PATH` | reads a file: the sandbox must deny it |
//! | `env` | counts environment variables: the sandbox has none |
//! | `print:TEXT` | prints TEXT to stdout and stderr, passes the record on |
//! | `flatmap:N` | returns N copies, each with a header `copy` = its index |
//! | `drop` | returns nothing |
//! | `error:CLASS` | fails with that class (data, retriable, fatal) |
//! | `clock` | returns the wall clock (clocks are allowed) |
//! | `sleep:MS` | sleeps MS milliseconds (blocked in the host), then passes |
//! | anything else | appends the `tag` config value to the value; with no
//! `tag`, passes the record through untouched (to measure the boundary) |

use sluice_sdk::guest::{Config, Transform};
use sluice_sdk::{ConnectError, Record};

struct Chaos {
    tag: String,
}

impl Transform for Chaos {
    fn configure(config: Config) -> Result<Self, ConnectError> {
        if let Some(bad) = config.keys().find(|k| *k != "tag") {
            return Err(ConnectError::fatal(format!("unknown key `{bad}`")));
        }
        Ok(Self {
            tag: config.get("tag").cloned().unwrap_or_default(),
        })
    }

    fn transform(&mut self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        if self.tag.is_empty()
            && record
                .value
                .as_deref()
                .is_some_and(|v| v.first() == Some(&b'{'))
        {
            return Ok(vec![record]);
        }
        let value =
            String::from_utf8_lossy(record.value.as_deref().unwrap_or_default()).into_owned();
        let (verb, arg) = value.split_once(':').unwrap_or((value.as_str(), ""));
        match verb {
            "trap" => panic!("chaos: trap requested"),
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![7u8; 8 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "read" => match std::fs::read(arg) {
                Ok(bytes) => {
                    record.value = Some(bytes);
                    Ok(vec![record])
                }
                Err(e) => Err(ConnectError::data(format!("reading {arg}: {e}"))),
            },
            "env" => {
                record.value = Some(std::env::vars().count().to_string().into_bytes());
                Ok(vec![record])
            }
            "print" => {
                println!("{arg}");
                eprintln!("{arg} (stderr)");
                Ok(vec![record])
            }
            "flatmap" => {
                let n: usize = arg
                    .parse()
                    .map_err(|_| ConnectError::data("flatmap needs a count"))?;
                Ok((0..n)
                    .map(|i| {
                        let mut r = record.clone();
                        r.add_header("copy", Some(i.to_string().into_bytes()));
                        r
                    })
                    .collect())
            }
            "drop" => Ok(vec![]),
            "error" => Err(match arg {
                "data" => ConnectError::data("chaos: data error requested"),
                "retriable" => ConnectError::retriable("chaos: retriable error requested"),
                _ => ConnectError::fatal("chaos: fatal error requested"),
            }),
            "sleep" => {
                let ms: u64 = arg
                    .parse()
                    .map_err(|_| ConnectError::data(format!("sleep:{arg}: not a number")))?;
                std::thread::sleep(std::time::Duration::from_millis(ms));
                Ok(vec![record])
            }
            "clock" => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap();
                record.value = Some(now.as_millis().to_string().into_bytes());
                Ok(vec![record])
            }
            _ => {
                record.value = Some(format!("{value}{}", self.tag).into_bytes());
                Ok(vec![record])
            }
        }
    }
}

sluice_sdk::export_transform!(Chaos);
