# Shell helpers shared by scripts/test.sh, scripts/flakes.sh and scripts/demo.sh (sourced).

# Test servers listen on ports the kernel says are free when a run starts,
# never fixed ones: a fixed port may be held by a developer's own servers
# or another run, and the tests would then talk to those.
free_block() { # a port P with P .. P+N-1 all free at this moment, below the
  # kernel's range for outgoing connections (so none is handed to a client
  # meanwhile)
  python3 -c 'import random,socket,sys
n=int(sys.argv[1])
def free(p):
    s=socket.socket()
    try: s.bind(("127.0.0.1",p)); return True
    except OSError: return False
    finally: s.close()
for b in random.sample(range(20000,32000-n,100),100):
    if all(free(p) for p in range(b,b+n)):
        print(b); break
else: sys.exit("no block of free ports")' "$1"
}
