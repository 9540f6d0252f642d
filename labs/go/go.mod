module tcpqueues/labs

go 1.25
