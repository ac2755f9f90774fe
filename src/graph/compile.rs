//! Compile: a checked [`GraphSpec`] -> a runnable [`Graph`].

use super::exprs::{ExprId, Exprs};
use super::*;
use crate::source::Sources;
use crate::spec::{self, GraphSpec, KindSpec, NodeSpec, Sp, Transport, ValueTable};
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error("cannot read `{path}`")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{path}` is not valid JSON")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("`{path}` is not a valid JSON Schema: {message}")]
    Schema { path: PathBuf, message: String },
    #[error("cannot compile `{what}`: {source}")]
    Jinja {
        what: String,
        #[source]
        source: minijinja::Error,
    },
    #[error("the graph refers to `{0}`, which it does not declare")]
    Unresolved(String),
}

struct Compiler<'a> {
    spec: &'a GraphSpec,
    text: &'a str,
    env: minijinja::Environment<'static>,
    exprs: Vec<String>,
    /// Contents of every file read, in order, for the graph hash.
    files: Vec<(String, String)>,
    load_child: LoadChild<'a>,
}

/// A subgraph node's graph, loaded from its path (the pipeline's loader), or why not.
pub(crate) type LoadChild<'a> = &'a dyn Fn(&std::path::Path) -> Result<Graph, String>;

/// Compiles a spec that passed `check`; `load_child` gives the graphs its subgraph
/// nodes name. Resolution failures here mean the spec was not checked first; they are
/// errors, not panics.
pub(crate) fn compile(
    spec: &GraphSpec,
    sources: &Sources,
    load_child: LoadChild<'_>,
) -> Result<Graph, CompileError> {
    let env = crate::jinja::environment();
    let mut c = Compiler {
        spec,
        text: sources.text(spec.file),
        env,
        exprs: Vec::new(),
        files: Vec::new(),
        load_child,
    };
    let field_ids: crate::fxhash::FxHashMap<String, FieldId> = spec
        .state
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name.get_ref().clone(), FieldId(i as u32)))
        .collect();
    let node_ids: crate::fxhash::FxHashMap<String, NodeId> = spec
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.get_ref().clone(), NodeId(i as u32)))
        .collect();
    let target = |name: &Sp<String>| -> Result<Target, CompileError> {
        if name.get_ref() == spec::END {
            return Ok(Target::End);
        }
        node_ids
            .get(name.get_ref())
            .map(|n| Target::Node(*n))
            .ok_or_else(|| CompileError::Unresolved(name.get_ref().clone()))
    };
    let field = |name: &Sp<String>| -> Result<FieldId, CompileError> {
        field_ids
            .get(name.get_ref())
            .copied()
            .ok_or_else(|| CompileError::Unresolved(name.get_ref().clone()))
    };

    let mut fields = Vec::new();
    for f in &spec.state {
        let schema = match &f.schema {
            Some(p) => Some(c.validator(p)?.1),
            None => None,
        };
        fields.push(Field {
            name: Arc::from(f.name.get_ref().as_str()),
            ty: f.ty.get_ref().clone(),
            default: f
                .default
                .as_ref()
                .map_or_else(|| f.ty.get_ref().zero(), |d| d.get_ref().clone()),
            reducer: f.reducer(),
            schema,
            constant: f.constant,
            configurable: f.configurable.clone(),
            input: !f.constant
                && spec
                    .graph
                    .input
                    .as_ref()
                    .is_none_or(|i| i.get_ref().iter().any(|n| n.get_ref() == f.name.get_ref())),
            output: spec
                .graph
                .output
                .as_ref()
                .is_none_or(|o| o.get_ref().iter().any(|n| n.get_ref() == f.name.get_ref())),
            required: f.required,
        });
    }

    // Anthropic's Messages API is reached through its own variables, as its SDKs do.
    let anthropic = spec
        .llm
        .provider
        .as_ref()
        .is_some_and(|p| p.get_ref() == "anthropic");
    let (default_url_env, default_key_env) = if anthropic {
        ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")
    } else {
        ("OPENAI_BASE_URL", "OPENAI_API_KEY")
    };
    let api_key_env = spec
        .llm
        .api_key_env
        .clone()
        .unwrap_or_else(|| default_key_env.into());
    let servers: Vec<Server> = spec
        .servers
        .iter()
        .map(|s| Server {
            name: s.name.get_ref().clone(),
            sampling: s.sampling,
            protocol: s.protocol,
            // Absolute and without `..`: a root goes to the server as a `file://` URI.
            roots: s
                .roots
                .iter()
                .map(|r| {
                    let p = spec.resolve(r.get_ref());
                    std::fs::canonicalize(&p)
                        .or_else(|_| std::path::absolute(&p))
                        .unwrap_or(p)
                })
                .collect(),
            transport: match &s.transport {
                Transport::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                } => ServerTransport::Stdio {
                    command: command.get_ref().clone(),
                    args: args.clone(),
                    env: env.clone(),
                    // Third-party servers get the process environment, but not the
                    // key to the model: a tool that reports its environment would put
                    // it into state, checkpoints and prompts.
                    env_remove: [api_key_env.as_str()]
                        .into_iter()
                        .filter(|k| !env.iter().any(|(name, _)| name == k))
                        .map(String::from)
                        .collect(),
                    cwd: cwd
                        .as_ref()
                        .map_or_else(|| spec.root.clone(), |c| spec.resolve(c.get_ref())),
                },
                Transport::Http {
                    url,
                    headers,
                    oauth,
                } => ServerTransport::Http {
                    url: url.get_ref().clone(),
                    headers: headers.clone(),
                    oauth: {
                        let mut oauth = (**oauth).clone();
                        // A token file named relatively is found from the graph's root, as `cwd` is.
                        if let Some(crate::spec::WorkloadToken::File { root, .. }) =
                            &mut oauth.workload
                        {
                            root.clone_from(&spec.root);
                        }
                        oauth
                    },
                },
                Transport::Store => ServerTransport::Store,
            },
        })
        .collect();
    let server = |name: &Sp<String>| -> Result<usize, CompileError> {
        spec.servers
            .iter()
            .position(|s| s.name.get_ref() == name.get_ref())
            .ok_or_else(|| CompileError::Unresolved(name.get_ref().clone()))
    };

    let doc: Option<toml::Table> = toml::from_str(c.text).ok();
    let mut nodes = Vec::new();
    for n in &spec.nodes {
        let files_before = c.files.len();
        let set = n
            .set
            .iter()
            .map(|(f, e)| Ok((field(f)?, c.expr(e))))
            .collect::<Result<Vec<_>, CompileError>>()?;
        let only_if = n.only_if.as_ref().map(|e| c.expr(e));
        let next = match (&n.next, &n.route) {
            _ if n.kind.get_ref().ends_run() => Next::Finish,
            _ if !n.fork.is_empty() => {
                let region = crate::region::region(spec, n).map_err(|e| {
                    CompileError::Unresolved(format!("the join of `{}` ({e:?})", n.name.get_ref()))
                })?;
                let join = match target(&Sp::new(0..0, region.join.to_string()))? {
                    Target::Node(j) => j,
                    Target::End => {
                        return Err(CompileError::Unresolved(format!(
                            "the join of `{}`",
                            n.name.get_ref()
                        )));
                    }
                };
                Next::Fork {
                    branches: n.fork.iter().map(&target).collect::<Result<_, _>>()?,
                    join,
                }
            }
            (Some(t), _) => Next::Goto(target(t)?),
            (None, Some(r)) => {
                let default = r.default.as_ref().map(&target).transpose()?;
                match &r.on {
                    Some(on) => Next::Switch {
                        on: c.expr(on),
                        cases: r
                            .cases
                            .iter()
                            .map(|(k, t)| Ok((k.get_ref().clone(), target(t)?)))
                            .collect::<Result<_, CompileError>>()?,
                        default,
                        forks: r
                            .case_forks
                            .iter()
                            .map(|(k, ts)| {
                                let region = crate::region::region_of(spec, ts).map_err(|e| {
                                    CompileError::Unresolved(format!(
                                        "the join of case `{}` of `{}` ({e:?})",
                                        k.get_ref(),
                                        n.name.get_ref()
                                    ))
                                })?;
                                let join = match target(&Sp::new(0..0, region.join.to_string()))? {
                                    Target::Node(j) => j,
                                    Target::End => {
                                        return Err(CompileError::Unresolved(format!(
                                            "the join of case `{}`",
                                            k.get_ref()
                                        )));
                                    }
                                };
                                Ok((
                                    k.get_ref().clone(),
                                    ts.iter().map(&target).collect::<Result<_, _>>()?,
                                    join,
                                ))
                            })
                            .collect::<Result<_, CompileError>>()?,
                    },
                    None => Next::When {
                        cases: r
                            .when
                            .iter()
                            .map(|w| {
                                Ok(WhenCase {
                                    label: w.label().to_string(),
                                    cond: c.expr(&w.cond),
                                    to: target(&w.to)?,
                                })
                            })
                            .collect::<Result<_, CompileError>>()?,
                        default,
                    },
                }
            }
            (None, None) => {
                return Err(CompileError::Unresolved(format!(
                    "the next node of `{}`",
                    n.name.get_ref()
                )));
            }
        };
        let body = c.body(n, &field, &target, &server)?;
        let map = match &n.map {
            Some(m) => Some(MapPlan {
                over: c.expr(
                    m.over
                        .as_ref()
                        .ok_or_else(|| CompileError::Unresolved("a map's `over`".into()))?,
                ),
                var: Arc::from(m.var.get_ref().as_str()),
                concurrency: m
                    .concurrency
                    .as_ref()
                    .map_or(1, |c| usize::try_from(*c.get_ref()).unwrap_or(usize::MAX)),
                collect_errors: m.collect_errors,
            }),
            None => None,
        };
        let fingerprint = {
            // The node's table as parsed (all its keys and sub-tables, wherever they
            // sit in the file), so moving text around does not count as an edit.
            let mut h = Sha256::new();
            let table = doc
                .as_ref()
                .and_then(|d| d.get("nodes"))
                .and_then(|nodes| nodes.get(n.name.get_ref()));
            h.update(serde_json::to_string(&table).unwrap_or_default().as_bytes());
            h.update(n.name.get_ref().as_bytes());
            for (_, text) in &c.files[files_before..] {
                h.update(text.as_bytes());
            }
            hex(&h.finalize())
        };
        nodes.push(Node {
            name: Arc::from(n.name.get_ref().as_str()),
            kind: *n.kind.get_ref(),
            body,
            set,
            only_if,
            next,
            on_error: n.on_error.as_ref().map(&target).transpose()?,
            breakpoint: n.breakpoint.as_ref().map(|b| *b.get_ref()),
            timeout: n.timeout.as_ref().map(|t| *t.get_ref()),
            retry: n.retry.as_ref().map(|r| Retry {
                attempts: r.attempts.min(u32::MAX as u64) as u32,
                backoff: r.backoff.unwrap_or(Duration::from_millis(200)),
                max_backoff: r.max_backoff.unwrap_or(Duration::from_secs(10)),
                jitter: r.jitter,
            }),
            map,
            fingerprint,
        });
    }

    let entry = spec
        .graph
        .entry
        .as_ref()
        .ok_or_else(|| CompileError::Unresolved("the entry node".into()))?;
    let entry = match target(entry)? {
        Target::Node(n) => n,
        Target::End => return Err(CompileError::Unresolved("the entry node".into())),
    };
    let limits = Limits {
        max_steps: spec.graph.max_steps.as_ref().map(|s| *s.get_ref()),
        max_wall_time: spec.graph.max_wall_time.as_ref().map(|s| *s.get_ref()),
        max_tokens: spec.graph.max_tokens.as_ref().map(|s| *s.get_ref()),
        on_limit: spec.graph.on_limit.as_ref().map(&target).transpose()?,
        budget: budget(spec),
    };
    let hash = {
        let mut h = Sha256::new();
        h.update(c.text.as_bytes());
        for (name, text) in &c.files {
            h.update(name.as_bytes());
            h.update(text.as_bytes());
        }
        hex(&h.finalize())
    };
    let llm = LlmDefaults {
        model: spec.llm.model.as_ref().map(|m| m.get_ref().clone()),
        base_url_env: spec
            .llm
            .base_url_env
            .clone()
            .unwrap_or_else(|| default_url_env.into()),
        api_key_env,
        temperature: spec.llm.temperature,
        timeout: spec
            .llm
            .timeout
            .as_ref()
            .map_or(Duration::from_secs(60), |t| *t.get_ref()),
        provider: spec
            .llm
            .provider
            .as_ref()
            .and_then(|p| crate::spec::Provider::parse(p.get_ref()))
            .unwrap_or_default(),
    };
    let expr_sources = c.exprs.clone();
    let field = |name: &str| field_ids.get(name).copied();
    let fast = expr_sources
        .iter()
        .map(|s| super::fast::compile(s, &field))
        .collect();
    let fast_templates = c
        .env
        .templates()
        .filter_map(|(name, t)| {
            let fast = super::fast_template::compile(name, t.source(), &field)?;
            Some((name.to_string(), fast))
        })
        .collect();
    let exprs = Exprs::build(c.env, c.exprs).map_err(|(i, source)| CompileError::Jinja {
        what: expr_sources[i].clone(),
        source,
    })?;
    Ok(Graph {
        output_declared: fields.iter().any(|f| !f.output),
        input_declared: fields.iter().any(|f| !f.constant && !f.input),
        name: spec
            .graph
            .name
            .as_ref()
            .map_or_else(String::new, |n| n.get_ref().clone()),
        path: spec.path.clone(),
        root: spec.root.clone(),
        hash,
        entry,
        limits,
        require_policy: spec.graph.require_policy,
        fields,
        nodes,
        servers,
        llm,
        shape: Arc::new(super::Shape::of(c.text, &c.files)),
        exprs,
        fast,
        fast_templates,
        expr_sources,
        field_ids,
        node_ids,
    })
}

impl Compiler<'_> {
    fn expr(&mut self, e: &Sp<String>) -> ExprId {
        self.exprs.push(e.get_ref().clone());
        ExprId((self.exprs.len() - 1) as u32)
    }

    fn read(&mut self, rel: &str) -> Result<String, CompileError> {
        let (_, text) = crate::source::read_graph_file(
            &self.spec.root,
            rel,
            self.spec.graph.allow_outside_root,
        )
        .map_err(|problem| CompileError::Read {
            path: self.spec.resolve(rel),
            source: match problem {
                crate::source::FileProblem::Io(e) => e,
                other => std::io::Error::other(other.to_string()),
            },
        })?;
        self.files.push((rel.to_string(), text.clone()));
        Ok(text)
    }

    fn json(&mut self, rel: &str) -> Result<serde_json::Value, CompileError> {
        let text = self.read(rel)?;
        serde_json::from_str(&text).map_err(|source| CompileError::Json {
            path: self.spec.resolve(rel),
            source,
        })
    }

    fn validator(
        &mut self,
        rel: &Sp<String>,
    ) -> Result<(Arc<serde_json::Value>, Arc<jsonschema::Validator>), CompileError> {
        let schema = self.json(rel.get_ref())?;
        let v = jsonschema::draft202012::new(&schema).map_err(|e| CompileError::Schema {
            path: self.spec.resolve(rel.get_ref()),
            message: e.to_string(),
        })?;
        Ok((Arc::new(schema), Arc::new(v)))
    }

    /// Registers a template file under its path (once) and returns its name.
    fn template_file(&mut self, rel: &Sp<String>) -> Result<String, CompileError> {
        let name = format!("file:{}", rel.get_ref());
        let text = self.read(rel.get_ref())?;
        if self.env.get_template(&name).is_err() {
            self.env
                .add_template_owned(name.clone(), text)
                .map_err(|source| CompileError::Jinja {
                    what: rel.get_ref().clone(),
                    source,
                })?;
        }
        Ok(name)
    }

    /// Registers an inline template and returns its name.
    fn template(
        &mut self,
        node: &NodeSpec,
        what: &str,
        t: &Sp<String>,
    ) -> Result<String, CompileError> {
        let name = format!("inline:{}:{what}", node.name.get_ref());
        self.env
            .add_template_owned(name.clone(), t.get_ref().clone())
            .map_err(|source| CompileError::Jinja {
                what: t.get_ref().clone(),
                source,
            })?;
        Ok(name)
    }

    fn value_tpl(&mut self, v: &ValueTable) -> ValueTpl {
        match v {
            ValueTable::Expr(e) => ValueTpl::Expr(self.expr(e)),
            ValueTable::Literal(l) => ValueTpl::Literal(l.get_ref().clone()),
            ValueTable::Array(items) => {
                ValueTpl::Array(items.iter().map(|i| self.value_tpl(i)).collect())
            }
            ValueTable::Table(entries) => ValueTpl::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.get_ref().clone(), self.value_tpl(v)))
                    .collect(),
            ),
        }
    }

    fn body(
        &mut self,
        n: &NodeSpec,
        field: &dyn Fn(&Sp<String>) -> Result<FieldId, CompileError>,
        target: &dyn Fn(&Sp<String>) -> Result<Target, CompileError>,
        server: &dyn Fn(&Sp<String>) -> Result<usize, CompileError>,
    ) -> Result<Body, CompileError> {
        let missing =
            |what: &str| CompileError::Unresolved(format!("`{what}` of `{}`", n.name.get_ref()));
        Ok(match &n.body {
            KindSpec::Set => Body::Set,
            KindSpec::Policy(p) => {
                let mut rules = Vec::new();
                for (i, r) in p.rules.iter().enumerate() {
                    let reason = match &r.reason {
                        Some(t) => Some(self.template(n, &format!("reason{i}"), t)?),
                        None => None,
                    };
                    rules.push(PolicyRule {
                        name: r.name.as_ref().map(|s| s.get_ref().clone()),
                        when: self.expr(&r.when),
                        decision: *r.decision.get_ref(),
                        reason,
                    });
                }
                let default_reason = match &p.default_reason {
                    Some(t) => self.template(n, "default_reason", t)?,
                    None => self.template(
                        n,
                        "default_reason",
                        &Sp::new(0..0, "no rule matched".into()),
                    )?,
                };
                Body::Policy(PolicyBody {
                    rules,
                    default: p.default.as_ref().map_or(Decision::Deny, |d| *d.get_ref()),
                    default_reason,
                    output: field(p.output.as_ref().ok_or_else(|| missing("output"))?)?,
                })
            }
            KindSpec::Interrupt(i) => {
                let resume_schema = match &i.resume_schema {
                    Some(s) => Some(self.validator(s)?),
                    None => None,
                };
                Body::Interrupt(InterruptBody {
                    payload: i.payload.as_ref().map(|p| self.value_tpl(p)),
                    resume_schema_json: resume_schema.as_ref().map(|(j, _)| j.clone()),
                    resume_schema: resume_schema.map(|(_, v)| v),
                    output: i.output.as_ref().map(field).transpose()?,
                    timeout: i.timeout.as_ref().map(|t| *t.get_ref()),
                    on_timeout: i.on_timeout.as_ref().map(target).transpose()?,
                })
            }
            KindSpec::Graph(g) => {
                let path = self
                    .spec
                    .resolve(g.graph.as_ref().ok_or_else(|| missing("graph"))?.get_ref());
                let child = (self.load_child)(&path).map_err(|e| {
                    CompileError::Unresolved(format!("the graph of `{}`: {e}", n.name.get_ref()))
                })?;
                Body::Graph(GraphBody {
                    child: Arc::new(child),
                    input: g
                        .input
                        .iter()
                        .map(|(k, e)| (k.get_ref().clone(), ValueTpl::Expr(self.expr(e))))
                        .collect(),
                    output: g
                        .output
                        .iter()
                        .map(|(f, c)| Ok((field(f)?, c.get_ref().clone())))
                        .collect::<Result<_, CompileError>>()?,
                })
            }
            KindSpec::Fail(f) => Body::Fail(FailBody {
                outcome: f
                    .outcome
                    .as_ref()
                    .map_or_else(|| "failed".into(), |o| o.get_ref().clone()),
                message: self.template(
                    n,
                    "message",
                    f.message.as_ref().ok_or_else(|| missing("message"))?,
                )?,
            }),
            KindSpec::Finalize(f) => Body::Finalize(FinalizeBody {
                outcome: f
                    .outcome
                    .as_ref()
                    .map_or_else(|| "done".into(), |o| o.get_ref().clone()),
                response: match &f.response {
                    Some(t) => Some(self.template(n, "response", t)?),
                    None => None,
                },
                output: f.output.as_ref().map(field).transpose()?,
            }),
            KindSpec::Llm(l) => {
                let (schema, validator, schema_hash) = match &l.schema {
                    Some(s) => {
                        let (schema, v) = self.validator(s)?;
                        let hash = hex(&Sha256::digest(schema.to_string().as_bytes()));
                        (Some(schema), Some(v), hash)
                    }
                    None => (None, None, String::new()),
                };
                let mut pseudo_tools = Vec::new();
                for p in &l.pseudo_tools {
                    let schema = match &p.schema {
                        Some(s) => Some(Arc::new(self.json(s.get_ref())?)),
                        None => None,
                    };
                    pseudo_tools.push(PseudoTool {
                        name: p.name.get_ref().clone(),
                        description: p.description.clone(),
                        schema,
                        to: target(&p.to)?,
                    });
                }
                Body::Llm(Box::new(LlmBody {
                    prompt: match &l.prompt {
                        Some(p) => Some(self.template_file(p)?),
                        // A chat node answers the conversation as it stands.
                        None if l.chat => None,
                        None => return Err(missing("prompt")),
                    },
                    system: l
                        .system
                        .as_ref()
                        .map(|s| self.template_file(s))
                        .transpose()?,
                    schema,
                    validator,
                    schema_hash,
                    output: field(l.output.as_ref().ok_or_else(|| missing("output"))?)?,
                    history: l.history.as_ref().map(field).transpose()?,
                    model: l.model.as_ref().map(|m| m.get_ref().clone()),
                    temperature: l.temperature,
                    retries: l.retries.unwrap_or(2).min(u32::MAX as u64) as u32,
                    fallback: l.fallback.as_ref().map(|e| self.expr(e)),
                    cache: l
                        .cache
                        .as_ref()
                        .map(|c| (self.expr(&c.key), *c.ttl.get_ref())),
                    tools: l
                        .tools
                        .as_ref()
                        .map(|t| {
                            Ok::<_, CompileError>((
                                server(&t.server)?,
                                t.only.iter().map(|s| s.get_ref().clone()).collect(),
                            ))
                        })
                        .transpose()?,
                    pseudo_tools,
                    stream: l.stream,
                    stream_field: l.stream_field.as_ref().map(|f| f.get_ref().clone()),
                    strict: l.strict.or(self.spec.llm.strict).unwrap_or(true),
                    parallel_tool_calls: l.parallel_tool_calls,
                    chat: l.chat,
                    sampling: {
                        let s = l.sampling.or(&self.spec.llm.sampling);
                        crate::spec::Sampling {
                            max_tokens: s
                                .max_tokens
                                .map(|m| u32::try_from(*m.get_ref()).unwrap_or(u32::MAX)),
                            reasoning_effort: s.reasoning_effort.map(Sp::into_inner),
                            seed: s.seed.map(Sp::into_inner),
                            top_p: s.top_p,
                            stop: s.stop.into_iter().map(Sp::into_inner).collect(),
                        }
                    },
                }))
            }
            KindSpec::Mcp(m) => {
                let mut calls = Vec::new();
                for (i, call) in m.calls.iter().enumerate() {
                    let tool = if call.tool.get_ref().contains("{{")
                        || call.tool.get_ref().contains("{%")
                    {
                        ToolName::Template(self.template(n, &format!("tool{i}"), &call.tool)?)
                    } else {
                        ToolName::Fixed(call.tool.get_ref().clone())
                    };
                    calls.push(Call {
                        tool,
                        args: call.args.as_ref().map(|a| self.value_tpl(a)),
                        output: call.output.as_ref().map(field).transpose()?,
                    });
                }
                Body::Mcp(McpBody {
                    server: server(m.server.as_ref().ok_or_else(|| missing("server"))?)?,
                    tool_calls: m.tool_calls.as_ref().map(field).transpose()?,
                    calls,
                    multi: m.multi,
                    side_effects: m.side_effects,
                    audit: m.audit.as_ref().map(field).transpose()?,
                })
            }
        })
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

/// `[budget]` and the prices it counts dollars by (a price file the checker read is
/// read again here; one gone since counts no dollars).
fn budget(spec: &GraphSpec) -> super::Budget {
    let b = &spec.budget;
    let prices = crate::check::cost::prices(spec)
        .ok()
        .flatten()
        .unwrap_or_default();
    super::Budget {
        tokens: b.tokens.as_ref().map(|n| *n.get_ref()),
        model_calls: b.model_calls.as_ref().map(|n| *n.get_ref()),
        tool_calls: b.tool_calls.as_ref().map(|n| *n.get_ref()),
        usd: b.usd.as_ref().map(|n| *n.get_ref()),
        prices: Arc::new(prices),
    }
}
