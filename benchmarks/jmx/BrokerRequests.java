// The broker's request counters by type, read over JMX from a local broker process.
//
//     java BrokerRequests.java PID
//
// Attaches to the JVM PID (same user), starts its local management agent (no
// port is opened) and, for every line read from stdin, prints one line: each
// request type's count since the broker started, summed over versions, as
// "Type=count" separated by spaces (kafka.network RequestMetrics RequestsPerSec).
// One process serves a whole benchmark, so the JVM starts only once.

import com.sun.tools.attach.VirtualMachine;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Map;
import java.util.TreeMap;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class BrokerRequests {
    public static void main(String[] args) throws Exception {
        VirtualMachine vm = VirtualMachine.attach(args[0]);
        String address = vm.startLocalManagementAgent();
        vm.detach();
        ObjectName pattern =
                new ObjectName("kafka.network:type=RequestMetrics,name=RequestsPerSec,*");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        try (JMXConnector c = JMXConnectorFactory.connect(new JMXServiceURL(address))) {
            MBeanServerConnection server = c.getMBeanServerConnection();
            while (in.readLine() != null) {
                Map<String, Long> counts = new TreeMap<>();
                for (ObjectName n : server.queryNames(pattern, null)) {
                    long v = ((Number) server.getAttribute(n, "Count")).longValue();
                    counts.merge(n.getKeyProperty("request"), v, Long::sum);
                }
                StringBuilder line = new StringBuilder();
                for (Map.Entry<String, Long> e : counts.entrySet()) {
                    line.append(e.getKey()).append('=').append(e.getValue()).append(' ');
                }
                System.out.println(line.toString().trim());
                System.out.flush();
            }
        }
    }
}
