//! The nodes of a simulated fleet: those listed under `nodes:`, filled up to `--nodes N` with
//! generated names.

use super::FleetNodeConfig;

/// A fleet size that cannot hold the nodes the configuration lists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--nodes {count} is fewer than the {listed} nodes listed under nodes:")]
pub struct FleetSizeError {
    pub count: usize,
    pub listed: usize,
}

/// The generated name of the fleet's `index`-th node.
pub fn generated_name(base: &str, index: usize) -> String {
    format!("{base}-{index}")
}

/// `count` nodes: those listed under `nodes:` first, then generated ones named after
/// `base` (`<base>-<i>`) up to `count`. Fewer than the list is an error: nothing listed is
/// silently left out.
pub fn with_generated(
    listed: &[FleetNodeConfig],
    base: &str,
    count: usize,
) -> Result<Vec<FleetNodeConfig>, FleetSizeError> {
    if count < listed.len() {
        return Err(FleetSizeError {
            count,
            listed: listed.len(),
        });
    }
    let mut nodes = listed.to_vec();
    let mut index = 0;
    while nodes.len() < count {
        let name = generated_name(base, index);
        index += 1;
        if !listed.iter().any(|node| node.name == name) {
            nodes.push(FleetNodeConfig {
                name,
                labels: Default::default(),
                capacity: Default::default(),
            });
        }
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(name: &str) -> FleetNodeConfig {
        FleetNodeConfig {
            name: name.to_owned(),
            labels: [("zone".to_owned(), "a".to_owned())].into(),
            capacity: Default::default(),
        }
    }

    #[test]
    fn generated_nodes_fill_up_after_the_listed_ones_without_taking_their_names() {
        let nodes = with_generated(&[listed("sim-1")], "sim", 3).expect("enough");
        let names: Vec<&str> = nodes.iter().map(|node| node.name.as_str()).collect();
        assert_eq!(names, ["sim-1", "sim-0", "sim-2"]);
        assert_eq!(nodes[0].labels.get("zone").map(String::as_str), Some("a"));
    }

    #[test]
    fn fewer_nodes_than_listed_is_an_error() {
        let error = with_generated(&[listed("a"), listed("b")], "sim", 1).expect_err("refused");
        assert!(
            error.to_string().contains("fewer than the 2 nodes listed"),
            "{error}"
        );
    }
}
