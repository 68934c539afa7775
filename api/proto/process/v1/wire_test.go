package processv1

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestWireContract pins every name and number clients of the reference daemon depend on, so an
// edit to process.proto that would break them fails here rather than in the field.
func TestWireContract(t *testing.T) {
	fd := File_process_v1_process_proto
	var got []string
	got = append(got, "package "+string(fd.Package()))
	services := fd.Services()
	for i := range services.Len() {
		s := services.Get(i)
		for j := range s.Methods().Len() {
			m := s.Methods().Get(j)
			got = append(got, fmt.Sprintf("rpc %s/%s(%s) %s stream=%v", s.FullName(), m.Name(), m.Input().Name(), m.Output().Name(), m.IsStreamingServer()))
		}
	}
	messages := fd.Messages()
	for i := range messages.Len() {
		m := messages.Get(i)
		fields := m.Fields()
		for j := range fields.Len() {
			f := fields.Get(j)
			got = append(got, fmt.Sprintf("%s.%s=%d %s%s%s", m.Name(), f.Name(), f.Number(), cardinality(f), kind(f), oneof(f)))
		}
	}
	enum := fd.Enums().Get(0)
	for i := range enum.Values().Len() {
		v := enum.Values().Get(i)
		got = append(got, fmt.Sprintf("enum %s.%s=%d", enum.Name(), v.Name(), v.Number()))
	}
	want := []string{
		"package process.v1",
		"rpc process.v1.ProcessService/Start(StartRequest) StartResponse stream=true",
		"rpc process.v1.ProcessService/Execute(ExecuteRequest) ExecuteResponse stream=false",
		"rpc process.v1.ProcessService/WriteStdin(WriteStdinRequest) WriteStdinResponse stream=false",
		"rpc process.v1.ProcessService/SendSignal(SendSignalRequest) SendSignalResponse stream=false",
		"rpc process.v1.ProcessService/ResizeTTY(ResizeTTYRequest) ResizeTTYResponse stream=false",
		"ProcessConfig.command=1 repeated string",
		"ProcessConfig.env_vars=2 map<string,string>",
		"ProcessConfig.cwd=3 optional string",
		"PTY.cols=1 uint32",
		"PTY.rows=2 uint32",
		"StartRequest.config=1 message ProcessConfig",
		"StartRequest.pty=2 optional message PTY",
		"StartResponse.init=1 message InitEvent oneof event",
		"StartResponse.stdout=2 bytes oneof event",
		"StartResponse.stderr=3 bytes oneof event",
		"StartResponse.exit=4 message ExitEvent oneof event",
		"InitEvent.process_id=1 int32",
		"ExitEvent.exit_code=1 int32",
		"ExecuteRequest.config=1 message ProcessConfig",
		"ExecuteResponse.exit_code=1 int32",
		"ExecuteResponse.stdout=2 bytes",
		"ExecuteResponse.stderr=3 bytes",
		"WriteStdinRequest.process_id=1 int32",
		"WriteStdinRequest.input=2 bytes oneof payload",
		"WriteStdinRequest.eof=3 message Empty oneof payload",
		"SendSignalRequest.process_id=1 int32",
		"SendSignalRequest.signal=2 enum Signal",
		"ResizeTTYRequest.process_id=1 int32",
		"ResizeTTYRequest.cols=2 uint32",
		"ResizeTTYRequest.rows=3 uint32",
		"enum Signal.SIGNAL_UNSPECIFIED=0",
		"enum Signal.SIGNAL_SIGINT=2",
		"enum Signal.SIGNAL_SIGKILL=9",
		"enum Signal.SIGNAL_SIGTERM=15",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("process.proto wire contract (-want +got):\n%s", diff)
	}
}

func cardinality(f protoreflect.FieldDescriptor) string {
	switch {
	case f.IsMap():
		return ""
	case f.IsList():
		return "repeated "
	case f.HasOptionalKeyword():
		return "optional "
	}
	return ""
}

func kind(f protoreflect.FieldDescriptor) string {
	switch {
	case f.IsMap():
		return fmt.Sprintf("map<%s,%s>", f.MapKey().Kind(), f.MapValue().Kind())
	case f.Kind() == protoreflect.MessageKind:
		return "message " + string(f.Message().Name())
	case f.Kind() == protoreflect.EnumKind:
		return "enum " + string(f.Enum().Name())
	}
	return f.Kind().String()
}

func oneof(f protoreflect.FieldDescriptor) string {
	if o := f.ContainingOneof(); o != nil && !o.IsSynthetic() {
		return " oneof " + string(o.Name())
	}
	return ""
}
