// java.net.ServerSocket as most Java servers are written: new ServerSocket(port), no backlog
// argument. Accepts and closes until stopped. Usage: java JavaServerSocket.java PORT
import java.net.ServerSocket;
import java.net.Socket;

public class JavaServerSocket {
    public static void main(String[] args) throws Exception {
        try (ServerSocket s = new ServerSocket(Integer.parseInt(args[0]))) {
            System.out.println("listening " + s.getLocalSocketAddress());
            System.out.flush();
            while (true) {
                try (Socket c = s.accept()) {
                    c.getOutputStream().write("ok\n".getBytes());
                }
            }
        }
    }
}
