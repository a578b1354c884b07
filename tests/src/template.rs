//! The functions' IAM policies as `template.yaml` declares them, rendered for one stack.
//!
//! The local world gives each function credentials whose policy comes from here, so a
//! permission the template lacks fails a test instead of a deployment. The CloudFormation
//! intrinsics the template uses (`!Ref`, `!Sub`, `!GetAtt`, `!Join`) are resolved from
//! [`StackFacts`]; one the renderer does not know is an error naming it, never a guess.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json};
use serde_yaml::Value as Yaml;

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not YAML")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("template.yaml: {at}: {why}")]
    Shape { at: String, why: String },
}

fn shape(at: impl Into<String>, why: impl Into<String>) -> TemplateError {
    TemplateError::Shape {
        at: at.into(),
        why: why.into(),
    }
}

/// What the intrinsics resolve to in one deployment of the stack.
#[derive(Debug, Clone)]
pub struct StackFacts {
    pub partition: String,
    pub region: String,
    pub account_id: String,
    pub url_suffix: String,
    /// Template parameters; one absent here takes the template's `Default`.
    pub parameters: BTreeMap<String, String>,
    /// `!Ref` of a resource (logical id -> physical id).
    pub refs: BTreeMap<String, String>,
    /// `!GetAtt` of a resource (`Logical.Attribute` -> value).
    pub attributes: BTreeMap<String, String>,
}

impl StackFacts {
    /// A stack for `cluster` in moto's account and region, with its resources named as
    /// the seeded world names them.
    pub fn local(cluster: &str) -> StackFacts {
        let account = crate::moto::ACCOUNT_ID;
        let region = crate::moto::REGION;
        StackFacts {
            partition: "aws".into(),
            region: region.into(),
            account_id: account.into(),
            url_suffix: "amazonaws.com".into(),
            parameters: [("ClusterName".to_string(), cluster.to_string())].into(),
            refs: BTreeMap::new(),
            attributes: BTreeMap::new(),
        }
    }

    pub fn with_attribute(mut self, attribute: &str, value: impl Into<String>) -> StackFacts {
        self.attributes.insert(attribute.to_string(), value.into());
        self
    }

    pub fn with_ref(mut self, logical_id: &str, value: impl Into<String>) -> StackFacts {
        self.refs.insert(logical_id.to_string(), value.into());
        self
    }
}

/// The IAM role a function runs as: its inline policy documents (resolved) and the ARNs of
/// its managed policies.
#[derive(Debug, Clone, PartialEq)]
pub struct RolePolicies {
    pub role: String,
    pub inline: Vec<(String, Json)>,
    pub managed: Vec<String>,
}

impl RolePolicies {
    /// Every statement of every inline policy.
    pub fn statements(&self) -> Vec<&Json> {
        self.inline
            .iter()
            .flat_map(|(_, doc)| match &doc["Statement"] {
                Json::Array(list) => list.iter().collect::<Vec<_>>(),
                one => vec![one],
            })
            .collect()
    }
}

/// How Lambda runs one function of the stack, as the template says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSettings {
    pub timeout: std::time::Duration,
    pub memory_mb: u32,
    pub reserved_concurrency: Option<u32>,
    /// Environment variables with a literal value, the function's over the globals'.
    pub literal_env: Vec<(String, String)>,
}

/// `template.yaml`, parsed.
#[derive(Debug, Clone)]
pub struct Template {
    doc: Yaml,
}

impl Template {
    /// The workspace's `template.yaml`.
    pub fn load() -> Result<Template, TemplateError> {
        Template::read(&crate::moto::workspace_root().join("template.yaml"))
    }

    pub fn read(path: &Path) -> Result<Template, TemplateError> {
        let text = std::fs::read_to_string(path).map_err(|source| TemplateError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Template::parse(&text).map_err(|source| TemplateError::Parse {
            path: path.to_path_buf(),
            source,
        })
    }

    pub fn parse(text: &str) -> Result<Template, serde_yaml::Error> {
        Ok(Template {
            doc: serde_yaml::from_str(text)?,
        })
    }

    /// The template as written, intrinsics unresolved (`!If`, `Condition`: what a
    /// deployment decides).
    pub fn as_written(&self) -> &Yaml {
        &self.doc
    }

    fn resource(&self, logical_id: &str) -> Result<&Yaml, TemplateError> {
        self.doc
            .get("Resources")
            .and_then(|r| r.get(logical_id))
            .ok_or_else(|| shape(format!("Resources.{logical_id}"), "no such resource"))
    }

    /// The logical ids of the stack's Lambda functions.
    pub fn functions(&self) -> Vec<String> {
        self.doc
            .get("Resources")
            .and_then(Yaml::as_mapping)
            .into_iter()
            .flatten()
            .filter(|(_, r)| {
                r.get("Type").and_then(Yaml::as_str) == Some("AWS::Serverless::Function")
            })
            .filter_map(|(k, _)| k.as_str().map(str::to_string))
            .collect()
    }

    /// What Lambda gives `function` (a logical id): its `Timeout`, `MemorySize`,
    /// `ReservedConcurrentExecutions`, each from the function or else `Globals.Function`,
    /// and the environment variables set to plain strings (the ones set by an intrinsic,
    /// such as `CLUSTER_NAME`, are the world's to fill).
    pub fn function_settings(&self, function: &str) -> Result<FunctionSettings, TemplateError> {
        let props = self.resource(function)?.get("Properties");
        let globals = self.doc.get("Globals").and_then(|g| g.get("Function"));
        let get = |key: &str| {
            props
                .and_then(|p| p.get(key))
                .or_else(|| globals.and_then(|g| g.get(key)))
        };
        let number = |key: &str| -> Result<Option<u64>, TemplateError> {
            get(key)
                .map(|v| {
                    v.as_u64().ok_or_else(|| {
                        shape(
                            format!("Resources.{function}.Properties.{key}"),
                            "not a number",
                        )
                    })
                })
                .transpose()
        };
        let mut env = Vec::new();
        for vars in [globals, props]
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("Environment")?.get("Variables")?.as_mapping())
        {
            for (k, v) in vars {
                // `as_str` would see through a tag: `!Ref X` is not the string "X".
                if let (Some(k), Yaml::String(v)) = (k.as_str(), v) {
                    env.retain(|(name, _): &(String, String)| name != k);
                    env.push((k.to_string(), v.to_string()));
                }
            }
        }
        Ok(FunctionSettings {
            timeout: std::time::Duration::from_secs(
                number("Timeout")?.ok_or_else(|| shape(function, "no Timeout"))?,
            ),
            memory_mb: number("MemorySize")?.unwrap_or(128) as u32,
            reserved_concurrency: number("ReservedConcurrentExecutions")?.map(|n| n as u32),
            literal_env: env,
        })
    }

    /// The role `function` (a logical id, `ProvisionerFunction`) runs as, resolved for
    /// `facts`. The function must name its role with `!GetAtt <Role>.Arn`.
    pub fn function_role(
        &self,
        function: &str,
        facts: &StackFacts,
    ) -> Result<RolePolicies, TemplateError> {
        let at = format!("Resources.{function}.Properties.Role");
        let role_ref = self
            .resource(function)?
            .get("Properties")
            .and_then(|p| p.get("Role"))
            .ok_or_else(|| shape(&at, "missing"))?;
        let role = match role_ref {
            Yaml::Tagged(t) if t.tag == "!GetAtt" => t
                .value
                .as_str()
                .and_then(|s| s.strip_suffix(".Arn"))
                .map(str::to_string),
            _ => None,
        }
        .ok_or_else(|| shape(&at, "expected !GetAtt <Role>.Arn"))?;
        self.role(&role, facts)
    }

    /// The inline and managed policies of the `AWS::IAM::Role` `role`, resolved.
    pub fn role(&self, role: &str, facts: &StackFacts) -> Result<RolePolicies, TemplateError> {
        let props = self
            .resource(role)?
            .get("Properties")
            .ok_or_else(|| shape(format!("Resources.{role}"), "no Properties"))?;
        let resolver = Resolver {
            template: self,
            facts,
        };
        let mut inline = Vec::new();
        if let Some(policies) = props.get("Policies").and_then(Yaml::as_sequence) {
            for (i, p) in policies.iter().enumerate() {
                let at = format!("Resources.{role}.Properties.Policies[{i}]");
                let name = p
                    .get("PolicyName")
                    .and_then(Yaml::as_str)
                    .ok_or_else(|| shape(&at, "no PolicyName"))?;
                let doc = p
                    .get("PolicyDocument")
                    .ok_or_else(|| shape(&at, "no PolicyDocument"))?;
                inline.push((name.to_string(), resolver.resolve(doc, &at)?));
            }
        }
        let mut managed = Vec::new();
        if let Some(arns) = props.get("ManagedPolicyArns") {
            let at = format!("Resources.{role}.Properties.ManagedPolicyArns");
            let arns = arns.as_sequence().ok_or_else(|| shape(&at, "not a list"))?;
            for (i, arn) in arns.iter().enumerate() {
                let at = format!("{at}[{i}]");
                // A managed policy of the stack itself is rendered like an inline one,
                // named by its logical id: its statements are the role's as much.
                if let Some((name, doc)) = self.stack_managed_policy(arn)? {
                    inline.push((
                        name.clone(),
                        resolver.resolve(doc, &format!("Resources.{name}"))?,
                    ));
                    continue;
                }
                match resolver.resolve(arn, &at)? {
                    Json::String(arn) => managed.push(arn),
                    _ => return Err(shape(at, "not a string")),
                }
            }
        }
        Ok(RolePolicies {
            role: role.to_string(),
            inline,
            managed,
        })
    }

    /// `!Ref X` where `X` is an `AWS::IAM::ManagedPolicy` of this template: its logical id
    /// and policy document.
    fn stack_managed_policy<'a>(
        &'a self,
        arn: &Yaml,
    ) -> Result<Option<(String, &'a Yaml)>, TemplateError> {
        let Yaml::Tagged(t) = arn else {
            return Ok(None);
        };
        let (true, Some(name)) = (t.tag == "!Ref", t.value.as_str()) else {
            return Ok(None);
        };
        let Ok(resource) = self.resource(name) else {
            return Ok(None);
        };
        if resource.get("Type").and_then(Yaml::as_str) != Some("AWS::IAM::ManagedPolicy") {
            return Ok(None);
        }
        let doc = resource
            .get("Properties")
            .and_then(|p| p.get("PolicyDocument"))
            .ok_or_else(|| shape(format!("Resources.{name}"), "no PolicyDocument"))?;
        Ok(Some((name.to_string(), doc)))
    }

    fn parameter_default(&self, name: &str) -> Option<String> {
        let default = self.doc.get("Parameters")?.get(name)?.get("Default")?;
        match default {
            Yaml::String(s) => Some(s.clone()),
            Yaml::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
}

struct Resolver<'a> {
    template: &'a Template,
    facts: &'a StackFacts,
}

impl Resolver<'_> {
    fn resolve(&self, value: &Yaml, at: &str) -> Result<Json, TemplateError> {
        Ok(match value {
            Yaml::Null => Json::Null,
            Yaml::Bool(b) => Json::Bool(*b),
            Yaml::Number(n) => serde_json::to_value(n).map_err(|e| shape(at, e.to_string()))?,
            Yaml::String(s) => Json::String(s.clone()),
            Yaml::Sequence(items) => Json::Array(
                items
                    .iter()
                    .map(|v| self.resolve(v, at))
                    .collect::<Result<_, _>>()?,
            ),
            Yaml::Mapping(m) => {
                let mut out = Map::new();
                for (k, v) in m {
                    let key = k
                        .as_str()
                        .ok_or_else(|| shape(at, "a mapping key that is not a string"))?;
                    out.insert(key.to_string(), self.resolve(v, &format!("{at}.{key}"))?);
                }
                Json::Object(out)
            }
            Yaml::Tagged(t) => {
                let tag = t.tag.to_string();
                match (tag.as_str(), &t.value) {
                    ("!Ref", Yaml::String(name)) => Json::String(self.reference(name, at)?),
                    ("!Sub", Yaml::String(text)) => Json::String(self.substitute(text, at)?),
                    ("!GetAtt", Yaml::String(path)) => Json::String(self.attribute(path, at)?),
                    ("!Join", Yaml::Sequence(args)) if args.len() == 2 => {
                        let sep = args[0]
                            .as_str()
                            .ok_or_else(|| shape(at, "!Join separator is not a string"))?;
                        let parts = match self.resolve(&args[1], at)? {
                            Json::Array(list) => list,
                            _ => return Err(shape(at, "!Join list is not a list")),
                        };
                        let parts: Vec<String> = parts
                            .iter()
                            .map(|p| p.as_str().map(str::to_string))
                            .collect::<Option<_>>()
                            .ok_or_else(|| shape(at, "!Join of a non-string"))?;
                        Json::String(parts.join(sep))
                    }
                    (other, _) => {
                        return Err(shape(at, format!("intrinsic {other} is not supported")));
                    }
                }
            }
        })
    }

    fn reference(&self, name: &str, at: &str) -> Result<String, TemplateError> {
        let facts = self.facts;
        let pseudo = match name {
            "AWS::Partition" => Some(facts.partition.clone()),
            "AWS::Region" => Some(facts.region.clone()),
            "AWS::AccountId" => Some(facts.account_id.clone()),
            "AWS::URLSuffix" => Some(facts.url_suffix.clone()),
            _ => None,
        };
        pseudo
            .or_else(|| facts.parameters.get(name).cloned())
            .or_else(|| self.template.parameter_default(name))
            .or_else(|| facts.refs.get(name).cloned())
            .ok_or_else(|| shape(at, format!("nothing known for !Ref {name}")))
    }

    fn attribute(&self, path: &str, at: &str) -> Result<String, TemplateError> {
        self.facts
            .attributes
            .get(path)
            .cloned()
            .ok_or_else(|| shape(at, format!("nothing known for !GetAtt {path}")))
    }

    fn substitute(&self, text: &str, at: &str) -> Result<String, TemplateError> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| shape(at, format!("unclosed ${{ in !Sub {text:?}")))?;
            let name = &after[..end];
            let value = if name.contains('.') && !name.starts_with("AWS::") {
                self.attribute(name, at)?
            } else {
                self.reference(name, at)?
            };
            out.push_str(&value);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEMPLATE: &str = r#"
Parameters:
  ClusterName: {Type: String}
  Poll: {Type: Number, Default: 5}
Resources:
  Q: {Type: AWS::SQS::Queue}
  R:
    Type: AWS::IAM::Role
    Properties:
      ManagedPolicyArns: [!Sub "arn:${AWS::Partition}:iam::aws:policy/X"]
      Policies:
        - PolicyName: p
          PolicyDocument:
            Statement:
              - Effect: Allow
                Action: [ec2:TerminateInstances]
                Resource: !GetAtt Q.Arn
                Condition:
                  StringEquals: {"aws:ResourceTag/c": !Ref ClusterName, "x": !Join [",", [!Ref Poll, b]]}
  F:
    Type: AWS::Serverless::Function
    Properties: {Role: !GetAtt R.Arn}
  M:
    Type: AWS::IAM::ManagedPolicy
    Properties:
      PolicyDocument:
        Statement:
          - {Effect: Allow, Action: ec2:DescribeImages, Resource: !Sub "arn:${AWS::Region}"}
  R2:
    Type: AWS::IAM::Role
    Properties:
      ManagedPolicyArns: [!Ref M, "arn:aws:iam::aws:policy/Y"]
  G:
    Type: AWS::Serverless::Function
    Properties: {Role: !GetAtt R2.Arn}
"#;

    #[test]
    fn a_functions_role_is_rendered_with_parameters_defaults_and_attributes_substituted() {
        let t = Template::parse(TEMPLATE).unwrap();
        let facts = StackFacts::local("c1").with_attribute("Q.Arn", "arn:q");
        let role = t.function_role("F", &facts).unwrap();
        assert_eq!(role.role, "R");
        assert_eq!(role.managed, ["arn:aws:iam::aws:policy/X"]);
        let s = role.statements()[0];
        assert_eq!(s["Resource"], "arn:q");
        assert_eq!(s["Condition"]["StringEquals"]["aws:ResourceTag/c"], "c1");
        assert_eq!(s["Condition"]["StringEquals"]["x"], "5,b");
    }

    #[test]
    fn a_managed_policy_of_the_stack_is_rendered_with_the_role_and_an_outside_one_kept_as_an_arn() {
        let t = Template::parse(TEMPLATE).unwrap();
        let role = t.function_role("G", &StackFacts::local("c1")).unwrap();
        assert_eq!(role.managed, ["arn:aws:iam::aws:policy/Y"]);
        assert_eq!(role.inline.len(), 1);
        assert_eq!(role.inline[0].0, "M");
        let s = role.statements()[0];
        assert_eq!(s["Action"], "ec2:DescribeImages");
        assert_eq!(s["Resource"], format!("arn:{}", crate::moto::REGION));
    }

    #[test]
    fn a_functions_settings_come_from_the_function_over_the_globals_and_skip_intrinsics() {
        let t = Template::parse(
            r#"
Globals:
  Function:
    MemorySize: 256
    Timeout: 30
    Environment: {Variables: {A: "g", B: "g", C: !Ref X}}
Resources:
  F:
    Type: AWS::Serverless::Function
    Properties:
      Timeout: 85
      ReservedConcurrentExecutions: 2
      Environment: {Variables: {B: "f", D: "80"}}
  H:
    Type: AWS::Serverless::Function
    Properties: {Timeout: soon}
"#,
        )
        .unwrap();
        let f = t.function_settings("F").unwrap();
        assert_eq!(f.timeout, std::time::Duration::from_secs(85));
        assert_eq!(f.memory_mb, 256);
        assert_eq!(f.reserved_concurrency, Some(2));
        let env: Vec<_> = f
            .literal_env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(env, [("A", "g"), ("B", "f"), ("D", "80")]);
        let err = t.function_settings("H").unwrap_err().to_string();
        assert!(err.contains("H") && err.contains("Timeout"), "{err}");
    }

    #[test]
    fn an_unknown_attribute_is_an_error_naming_where_it_is_used() {
        let t = Template::parse(TEMPLATE).unwrap();
        let err = t
            .function_role("F", &StackFacts::local("c1"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("Policies[0]") && err.contains("Q.Arn"),
            "{err}"
        );
    }
}
