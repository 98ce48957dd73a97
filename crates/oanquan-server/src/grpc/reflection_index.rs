//! Server reflection (`grpc.reflection.v1` and `v1alpha`) from the descriptor sets the server
//! was built with.
//!
//! tonic-reflection's service ends the whole stream with `NOT_FOUND` when one lookup misses, so
//! a client that asks for a name it does not know (Python's `ProtoReflectionDescriptorDatabase`
//! on every missed lookup) loses the stream and every answer after it. The reflection protocol
//! answers a miss with an in-stream `ErrorResponse` and goes on: this service does. Each file is
//! answered alone, as tonic-reflection answers it (clients ask for the dependencies they lack by
//! name); symbols are found as it finds them (messages, nested ones, fields, oneofs, enums,
//! their values, services and methods).
//!
//! The per-message rate limit and the refusal of undecodable or hostile requests stay with
//! [`super::reflection::Metered`], around this service.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use prost::Message as _;
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorSet};
use tonic::{Code, Request, Response, Status, Streaming};

/// What the reflection service knows: the services it lists, each file's encoded descriptor by
/// name, and the file that defines each fully qualified symbol.
#[derive(Debug, Default)]
pub struct Index {
    services: Vec<String>,
    files: HashMap<String, Vec<u8>>,
    symbols: HashMap<String, String>,
}

/// A lookup's failure, answered in the stream: a gRPC code and a message.
type Miss = (Code, String);

impl Index {
    /// The index of every file in `sets` (encoded `FileDescriptorSet`s); a file named twice is
    /// taken once.
    ///
    /// # Errors
    ///
    /// A set that does not decode.
    pub fn new(sets: &[&[u8]]) -> Result<Index, prost::DecodeError> {
        let mut index = Index::default();
        for set in sets {
            for file in FileDescriptorSet::decode(*set)?.file {
                let name = file.name().to_owned();
                if index.files.contains_key(&name) {
                    continue;
                }
                let package = file.package().to_owned();
                for message in &file.message_type {
                    index.message(&name, &package, message);
                }
                for enumeration in &file.enum_type {
                    index.enumeration(&name, &package, enumeration);
                }
                for service in &file.service {
                    let service_name = qualified(&package, service.name());
                    for method in &service.method {
                        index.symbol(&name, qualified(&service_name, method.name()));
                    }
                    index.services.push(service_name.clone());
                    index.symbol(&name, service_name);
                }
                index.files.insert(name, file.encode_to_vec());
            }
        }
        index.services.sort();
        Ok(index)
    }

    fn symbol(&mut self, file: &str, symbol: String) {
        self.symbols
            .entry(symbol)
            .or_insert_with(|| file.to_owned());
    }

    fn message(&mut self, file: &str, scope: &str, message: &DescriptorProto) {
        let name = qualified(scope, message.name());
        for nested in &message.nested_type {
            self.message(file, &name, nested);
        }
        for enumeration in &message.enum_type {
            self.enumeration(file, &name, enumeration);
        }
        for field in &message.field {
            self.symbol(file, qualified(&name, field.name()));
        }
        for oneof in &message.oneof_decl {
            self.symbol(file, qualified(&name, oneof.name()));
        }
        self.symbol(file, name);
    }

    fn enumeration(&mut self, file: &str, scope: &str, enumeration: &EnumDescriptorProto) {
        let name = qualified(scope, enumeration.name());
        for value in &enumeration.value {
            self.symbol(file, qualified(&name, value.name()));
        }
        self.symbol(file, name);
    }

    /// The services, sorted by name.
    #[must_use]
    pub fn services(&self) -> &[String] {
        &self.services
    }

    /// The encoded descriptor of the file named `name`.
    ///
    /// # Errors
    ///
    /// `NOT_FOUND` naming it.
    pub fn file(&self, name: &str) -> Result<&[u8], Miss> {
        self.files.get(name).map(Vec::as_slice).ok_or_else(|| {
            (
                Code::NotFound,
                format!("file {} not found", oanquan_game::quoted(name)),
            )
        })
    }

    /// The encoded descriptor of the file that defines `symbol` (fully qualified, no leading
    /// dot).
    ///
    /// # Errors
    ///
    /// `NOT_FOUND` naming it.
    pub fn defining(&self, symbol: &str) -> Result<&[u8], Miss> {
        self.symbols
            .get(symbol)
            .and_then(|file| self.files.get(file))
            .map(Vec::as_slice)
            .ok_or_else(|| {
                (
                    Code::NotFound,
                    format!("symbol {} not found", oanquan_game::quoted(symbol)),
                )
            })
    }
}

/// `name` in `scope` (a package, a message, a service).
fn qualified(scope: &str, name: &str) -> String {
    if scope.is_empty() {
        name.to_owned()
    } else {
        format!("{scope}.{name}")
    }
}

/// A reflection response stream.
type Answers<R> = Pin<Box<dyn Stream<Item = Result<R, Status>> + Send>>;

/// The service of one reflection version (`v1` or `v1alpha`): both have the same messages
/// under different packages.
macro_rules! reflection_service {
    ($version:ident, $service:ident) => {
        /// Reflection of this version: see the module docs.
        #[derive(Debug, Clone)]
        pub struct $service {
            index: Arc<Index>,
        }

        impl $service {
            /// The service answering from `index`.
            #[must_use]
            pub fn server(
                index: Arc<Index>,
            ) -> tonic_reflection::pb::$version::server_reflection_server::ServerReflectionServer<
                $service,
            > {
                tonic_reflection::pb::$version::server_reflection_server::ServerReflectionServer::new(
                    $service { index },
                )
            }

            fn answer(
                index: &Index,
                request: tonic_reflection::pb::$version::ServerReflectionRequest,
            ) -> tonic_reflection::pb::$version::ServerReflectionResponse {
                use tonic_reflection::pb::$version::server_reflection_request::MessageRequest;
                use tonic_reflection::pb::$version::server_reflection_response::MessageResponse;
                use tonic_reflection::pb::$version::{
                    ErrorResponse, ExtensionNumberResponse, FileDescriptorResponse,
                    ListServiceResponse, ServiceResponse,
                };
                let file = |found: Result<&[u8], Miss>| {
                    found.map(|bytes| {
                        MessageResponse::FileDescriptorResponse(FileDescriptorResponse {
                            file_descriptor_proto: vec![bytes.to_vec()],
                        })
                    })
                };
                let answer = match &request.message_request {
                    None => Err((
                        Code::InvalidArgument,
                        "the request names no lookup (message_request is unset)".to_owned(),
                    )),
                    Some(MessageRequest::FileByFilename(name)) => file(index.file(name)),
                    Some(MessageRequest::FileContainingSymbol(symbol)) => {
                        file(index.defining(symbol))
                    }
                    // None of these files declares an extension.
                    Some(MessageRequest::FileContainingExtension(_)) => Err((
                        Code::NotFound,
                        "no extensions are declared in this server's files".to_owned(),
                    )),
                    // Known types have no extension numbers; grpcurl asks and expects an
                    // answer (tonic's workaround, kept).
                    Some(MessageRequest::AllExtensionNumbersOfType(name)) => {
                        index.defining(name).map(|_| {
                            MessageResponse::AllExtensionNumbersResponse(ExtensionNumberResponse {
                                base_type_name: name.clone(),
                                extension_number: Vec::new(),
                            })
                        })
                    }
                    Some(MessageRequest::ListServices(_)) => {
                        Ok(MessageResponse::ListServicesResponse(ListServiceResponse {
                            service: index
                                .services()
                                .iter()
                                .map(|name| ServiceResponse { name: name.clone() })
                                .collect(),
                        }))
                    }
                };
                let message_response = answer.unwrap_or_else(|(code, message)| {
                    MessageResponse::ErrorResponse(ErrorResponse {
                        error_code: code as i32,
                        error_message: message,
                    })
                });
                tonic_reflection::pb::$version::ServerReflectionResponse {
                    valid_host: request.host.clone(),
                    original_request: Some(request),
                    message_response: Some(message_response),
                }
            }
        }

        #[tonic::async_trait]
        impl tonic_reflection::pb::$version::server_reflection_server::ServerReflection
            for $service
        {
            type ServerReflectionInfoStream =
                Answers<tonic_reflection::pb::$version::ServerReflectionResponse>;

            async fn server_reflection_info(
                &self,
                request: Request<Streaming<tonic_reflection::pb::$version::ServerReflectionRequest>>,
            ) -> Result<Response<Self::ServerReflectionInfoStream>, Status> {
                let index = Arc::clone(&self.index);
                // One answer a request, in order; a request stream that fails ends the call
                // with its status.
                let answers = request
                    .into_inner()
                    .map(move |request| request.map(|request| Self::answer(&index, request)));
                Ok(Response::new(Box::pin(answers)))
            }
        }
    };
}

reflection_service!(v1, ReflectionV1);
reflection_service!(v1alpha, ReflectionV1Alpha);

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> Index {
        Index::new(&[
            oanquan_proto::FILE_DESCRIPTOR_SET,
            tonic_health::pb::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
        ])
        .expect("the sets decode")
    }

    #[test]
    fn symbols_of_every_kind_are_found_in_their_file() {
        let index = index();
        for symbol in [
            "oanquan.v1.GameService",
            "oanquan.v1.GameService.PlayMove",
            "oanquan.v1.Game",
            "oanquan.v1.Game.id",
            "oanquan.v1.LobbyEvent.Snapshot",
            "oanquan.v1.ErrorReason",
            "oanquan.v1.ErrorReason.ERROR_REASON_NOT_YOUR_TURN",
            "grpc.health.v1.Health",
        ] {
            let bytes = index.defining(symbol).expect(symbol);
            let file = prost_types::FileDescriptorProto::decode(bytes).unwrap();
            assert!(!file.name().is_empty(), "{symbol}");
        }
        assert!(
            index
                .services()
                .contains(&"oanquan.v1.RulesService".to_owned())
        );
        assert!(
            index
                .services()
                .contains(&"grpc.reflection.v1.ServerReflection".to_owned())
        );
        let (code, message) = index.defining("oanquan.v1.Nope").unwrap_err();
        assert_eq!(code, Code::NotFound);
        assert_eq!(message, "symbol \"oanquan.v1.Nope\" not found");
    }
}
