# temper_generate_grpc(OUT_SOURCES PROTO_ROOT file.proto...): runs protoc with the gRPC plugin on each
# file (paths relative to PROTO_ROOT) and returns the generated .cc files; headers land beside them in
# the current binary directory.
find_package(Protobuf REQUIRED)
find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

function(temper_generate_grpc out_sources proto_root)
  set(generated)
  foreach(proto ${ARGN})
    get_filename_component(dir ${proto} DIRECTORY)
    get_filename_component(stem ${proto} NAME_WE)
    set(out ${CMAKE_CURRENT_BINARY_DIR}/${dir}/${stem})
    add_custom_command(
      OUTPUT ${out}.pb.cc ${out}.pb.h ${out}.grpc.pb.cc ${out}.grpc.pb.h
      COMMAND protobuf::protoc
        --proto_path=${proto_root}
        --cpp_out=${CMAKE_CURRENT_BINARY_DIR}
        --grpc_out=${CMAKE_CURRENT_BINARY_DIR}
        --plugin=protoc-gen-grpc=${GRPC_CPP_PLUGIN}
        ${proto_root}/${proto}
      DEPENDS ${proto_root}/${proto}
      COMMENT "protoc ${proto}")
    list(APPEND generated ${out}.pb.cc ${out}.grpc.pb.cc)
  endforeach()
  set(${out_sources} ${generated} PARENT_SCOPE)
endfunction()
