// A Java server as most are written: new ServerSocket(port), then a stalled accept loop.
// ServerSocket(port) asks listen() for Java's default backlog, 50, on the wildcard of an
// IPv6 socket that also takes IPv4 (dual-stack "::", where IPv6 is up): its IPv4 clients
// are ::ffff:a.b.c.d to the kernel. Usage: java StallServer.java PORT SECONDS
import java.net.ServerSocket;

public class StallServer {
    public static void main(String[] args) throws Exception {
        try (ServerSocket s = new ServerSocket(Integer.parseInt(args[0]))) {
            System.out.println("listening " + s.getLocalSocketAddress());
            System.out.flush();
            Thread.sleep(Long.parseLong(args[1]) * 1000L); // never accepts: the queue fills
        }
    }
}
