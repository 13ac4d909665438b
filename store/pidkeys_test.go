package store

import "testing"

// The keys of agents gputop cannot see keep apart from real pids and from
// remote hosts' keys, hold the pid they gave, and read as such.
func TestNamespacePIDKeys(t *testing.T) {
	k := NamespacePID(3, 1)
	if host, pid := SplitPID(k); host != 0 || pid != 1 || NamespaceConn(k) != 3 || !MachineKey(k) {
		t.Fatalf("NamespacePID(3, 1) = %d: host %d, pid %d, conn %d", k, host, pid, NamespaceConn(k))
	}
	if k <= HostPID(MaxHosts, 1<<PIDBits-1) {
		t.Errorf("key %d within the range of hosts' keys", k)
	}
	r := HostPID(2, k) // a remote host's namespace-local agent
	if host, pid := SplitPID(r); host != 2 || pid != 1 || NamespaceConn(r) != 3 || MachineKey(r) {
		t.Errorf("HostPID(2, %d) = %d: host %d, pid %d, conn %d", k, r, host, pid, NamespaceConn(r))
	}
	st := New(DefaultOptions())
	st.SetHost(Host{ID: 2, Name: "node2"})
	for key, want := range map[int]string{1234: "1234", k: "ns3:1", r: "node2:ns3:1", HostPID(2, 77): "node2:77"} {
		if got := st.PIDLabel(key); got != want {
			t.Errorf("PIDLabel(%d) = %q, want %q", key, got, want)
		}
	}
	for _, bad := range []int{0, -1, HostPID(1, 5), 1 << PIDBits} {
		if MachineKey(bad) {
			t.Errorf("MachineKey(%d) = true", bad)
		}
	}
}
