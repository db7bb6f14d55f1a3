/* The pod sandbox process of the real e2e node ("pause"): registry.k8s.io is unreachable, so
 * e2e/node builds this statically. It holds the pod's namespaces, reaps orphans and exits on
 * SIGINT/SIGTERM, as Kubernetes' own pause does. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, 0, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction q = {0}, r = {0};
  q.sa_handler = quit;
  sigaction(SIGINT, &q, 0);
  sigaction(SIGTERM, &q, 0);
  r.sa_handler = reap;
  r.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &r, 0);
  for (;;) pause();
}
