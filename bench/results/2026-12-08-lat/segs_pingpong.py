import socket,sys,time
mode=sys.argv[1]; role=sys.argv[2]; N=20000
def ls(p):
    s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1); s.bind(('0.0.0.0',p)); s.listen(1); c,_=s.accept(); c.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1); return c
def cn(h,p):
    for i in range(100):
        try:
            s=socket.create_connection((h,p)); s.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1); return s
        except Exception: time.sleep(0.05)
if role=='srv':
    a=ls(19001); b=a if mode=='one' else cn(sys.argv[3],19002)
    for i in range(N):
        a.recv(8); b.send(b'x'*8)
else:
    h=sys.argv[3]; a=cn(h,19001); b=a if mode=='one' else ls(19002)
    t=time.time()
    for i in range(N):
        a.send(b'x'*8); b.recv(8)
    print(mode,(time.time()-t)/N*1e6,'us')
