//! The part of Kubernetes' CEL library (`k8s.io/apiserver/pkg/cel/library`) that the emulator
//! offers on top of the `cel` crate's standard library and its `strings` and `lists` extensions.
//!
//! Offered: `isIP(string)`, `isCIDR(string)`, `isURL(string)` (Kubernetes' IP, CIDR and URL
//! libraries, as boolean checks only; `ip(...)`/`cidr(...)`/`url(...)` objects are not offered),
//! the list functions `<list>.isSorted()`, `<list>.sum()`, `<list>.min()`, `<list>.max()`, and the
//! regex functions `<string>.find(<regex>)` and `<string>.findAll(<regex>)`.

use std::net::IpAddr;
use std::sync::Arc;

use cel::extractors::This;
use cel::{Context, ExecutionError, Value};
use regex::Regex;

use super::formats::{is_cidr, is_request_uri};

/// Registers the functions listed in the module documentation on `ctx`. A name the `cel` crate
/// already declares as an overload is left to the crate.
pub(crate) fn register(ctx: &mut Context<'_, '_>) {
    let _ = ctx.add_function("isIP", is_ip);
    let _ = ctx.add_function("isCIDR", |s: Arc<String>| is_cidr(&s));
    let _ = ctx.add_function("isURL", |s: Arc<String>| is_request_uri(&s));
    let _ = ctx.add_function("isSorted", is_sorted);
    let _ = ctx.add_function("sum", sum);
    let _ = ctx.add_function("min", |This(list): This<Arc<Vec<Value>>>| {
        extreme(&list, std::cmp::Ordering::Less)
    });
    let _ = ctx.add_function("max", |This(list): This<Arc<Vec<Value>>>| {
        extreme(&list, std::cmp::Ordering::Greater)
    });
    let _ = ctx.add_function("find", find);
    let _ = ctx.add_function("findAll", find_all);
}

/// `isIP(string)`: an IPv4 or IPv6 address without zone; IPv4 octets with leading zeros are
/// refused, as Kubernetes' IP library does.
fn is_ip(s: Arc<String>) -> bool {
    s.parse::<IpAddr>().is_ok()
}

/// `<list>.isSorted()`: every item is less than or equal to the next.
fn is_sorted(This(list): This<Arc<Vec<Value>>>) -> Result<bool, ExecutionError> {
    for pair in list.windows(2) {
        match pair[0].partial_cmp(&pair[1]) {
            Some(std::cmp::Ordering::Greater) => return Ok(false),
            Some(_) => {}
            None => {
                return Err(ExecutionError::function_error(
                    "isSorted",
                    "list items are not comparable",
                ));
            }
        }
    }
    Ok(true)
}

/// `<list>.sum()` of ints or doubles (0 for an empty list).
fn sum(This(list): This<Arc<Vec<Value>>>) -> Result<Value, ExecutionError> {
    let mut int_total: i64 = 0;
    let mut float_total: f64 = 0.0;
    let mut floats = false;
    for item in list.iter() {
        match item {
            Value::Int(i) => {
                int_total = int_total
                    .checked_add(*i)
                    .ok_or_else(|| ExecutionError::function_error("sum", "overflow"))?;
            }
            Value::Float(f) => {
                floats = true;
                float_total += f;
            }
            _ => {
                return Err(ExecutionError::function_error(
                    "sum",
                    "list items must be numbers",
                ));
            }
        }
    }
    Ok(if floats {
        Value::Float(float_total + int_total as f64)
    } else {
        Value::Int(int_total)
    })
}

/// `<list>.min()` / `<list>.max()`: the least or greatest item; an error for an empty list.
fn extreme(list: &[Value], wanted: std::cmp::Ordering) -> Result<Value, ExecutionError> {
    let mut best: Option<&Value> = None;
    for item in list {
        best = match best {
            None => Some(item),
            Some(current) => match item.partial_cmp(current) {
                Some(order) if order == wanted => Some(item),
                Some(_) => Some(current),
                None => {
                    return Err(ExecutionError::function_error(
                        "min/max",
                        "list items are not comparable",
                    ));
                }
            },
        };
    }
    best.cloned()
        .ok_or_else(|| ExecutionError::function_error("min/max", "the list is empty"))
}

/// `<string>.find(<regex>)`: the first match, or the empty string.
fn find(This(s): This<Arc<String>>, pattern: Arc<String>) -> Result<Value, ExecutionError> {
    let re = Regex::new(&pattern).map_err(|e| ExecutionError::function_error("find", e))?;
    Ok(Value::String(Arc::new(
        re.find(&s)
            .map(|m| m.as_str().to_string())
            .unwrap_or_default(),
    )))
}

/// `<string>.findAll(<regex>)`: every match.
fn find_all(This(s): This<Arc<String>>, pattern: Arc<String>) -> Result<Value, ExecutionError> {
    let re = Regex::new(&pattern).map_err(|e| ExecutionError::function_error("findAll", e))?;
    let found: Vec<Value> = re
        .find_iter(&s)
        .map(|m| Value::String(Arc::new(m.as_str().to_string())))
        .collect();
    Ok(Value::List(Arc::new(found)))
}
