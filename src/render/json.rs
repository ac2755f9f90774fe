use crate::spec::{EdgeKind, GraphSpec};
use crate::topology::{LinkKind, Topology, Vertex};
use petgraph::visit::EdgeRef;
use serde_json::{Value as Json, json};

/// The graph as the LangGraph API draws it (`GET /assistants/{id}/graph`): nodes
/// `__start__`, `__end__` and one per node with its kind and description, and edges
/// with their case names; `conditional` marks the edges a route chooses among.
pub fn json(spec: &GraphSpec) -> Json {
    let topo = Topology::build(spec);
    let id = |ix| topo.wire_id(spec, ix).to_string();
    let nodes: Vec<Json> = topo
        .graph
        .node_indices()
        .map(|ix| match &topo.graph[ix] {
            Vertex::Node(i) => {
                let n = &spec.nodes[*i];
                json!({
                    "id": n.name.get_ref(),
                    "type": "runnable",
                    "data": {
                        "id": n.name.get_ref(),
                        "name": n.name.get_ref(),
                        "kind": n.kind.get_ref().name(),
                        "description": n.description,
                    },
                })
            }
            Vertex::Missing(n) => json!({ "id": n, "type": "unknown", "data": n }),
            _ => json!({ "id": id(ix), "type": "schema", "data": id(ix) }),
        })
        .collect();
    let edges: Vec<Json> = topo
        .graph
        .edge_references()
        .filter(|e| !(e.weight().kind == LinkKind::Limit && e.source() == topo.start))
        .map(|e| {
            let link = e.weight();
            let conditional = matches!(
                link.kind,
                LinkKind::Edge(
                    EdgeKind::Case
                        | EdgeKind::Default
                        | EdgeKind::PseudoTool
                        | EdgeKind::Timeout
                        | EdgeKind::Error
                )
            );
            let mut edge = json!({
                "source": id(e.source()),
                "target": id(e.target()),
                "conditional": conditional,
            });
            if let Some(label) = &link.label {
                edge["data"] = json!(label);
            }
            edge
        })
        .collect();
    json!({ "nodes": nodes, "edges": edges })
}
