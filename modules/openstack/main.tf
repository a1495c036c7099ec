# OpenStack instances booted from a Talos image; the machine config is user_data, served from a
# config drive so no metadata service is needed.
# Credentials: the usual OS_* variables (OS_AUTH_URL, OS_USERNAME, OS_PASSWORD, OS_PROJECT_NAME,
# OS_USER_DOMAIN_NAME, OS_PROJECT_DOMAIN_NAME, OS_REGION_NAME) or an application credential
# (OS_APPLICATION_CREDENTIAL_ID, OS_APPLICATION_CREDENTIAL_SECRET).

terraform {
  required_version = ">= 1.4"
  required_providers {
    openstack = {
      source  = "terraform-provider-openstack/openstack"
      version = "~> 3.0"
    }
  }
}

variable "cluster_name" {
  type = string
}

variable "machines" {
  description = "name => machine; user_data is the Talos machine config (secret)."
  type = map(object({
    role              = string
    user_data         = string
    size              = optional(string)
    image             = optional(string)
    availability_zone = optional(string)
    floating_ip       = optional(bool)
  }))
  sensitive = true
}

variable "default_size" {
  description = "Flavor name when a machine has no size."
  type        = string
  default     = null
}

variable "default_image" {
  description = "Talos image id when a machine has no image."
  type        = string
  default     = null
}

variable "network_ids" {
  description = "Networks to attach, first one primary. Use a dual-stack network for IPv6."
  type        = list(string)
}

variable "security_groups" {
  description = "Security group names for the instances."
  type        = list(string)
  default     = ["default"]
}

variable "floating_ip" {
  description = "Give every machine a floating IP (a machine's own floating_ip wins); tenant networks are not reachable from home without one."
  type        = bool
  default     = false
}

variable "floating_ip_pool" {
  description = "Name of the external network floating IPs come from; needed when any machine gets one."
  type        = string
  default     = null
}

locals {
  names = toset(nonsensitive(keys(var.machines)))
  spec = {
    for name in local.names : name => {
      role  = nonsensitive(var.machines[name].role)
      size  = try(coalesce(nonsensitive(var.machines[name].size), var.default_size), null)
      image = try(coalesce(nonsensitive(var.machines[name].image), var.default_image), null)
      zone  = nonsensitive(var.machines[name].availability_zone)
      fip   = coalesce(nonsensitive(var.machines[name].floating_ip), var.floating_ip)
    }
  }
  with_fip = toset([for name in local.names : name if local.spec[name].fip])
  # Nova takes user_data base64-encoded and caps that at 65,535 characters (about 48 KiB of config);
  # past it the create fails mid-apply, after other machines may have been made.
  user_data_limit = 65535
  user_data_b64_chars = {
    for name in local.names : name => nonsensitive(length(base64encode(var.machines[name].user_data)))
  }
}

resource "openstack_compute_instance_v2" "machine" {
  for_each = local.names

  name              = "${var.cluster_name}-${each.key}"
  flavor_name       = local.spec[each.key].size
  image_id          = local.spec[each.key].image
  availability_zone = local.spec[each.key].zone
  security_groups   = var.security_groups
  user_data         = var.machines[each.key].user_data
  config_drive      = true

  # Nova refuses metadata keys outside [a-zA-Z0-9-_:. ] (no "/").
  metadata = {
    "rezus.cloud:cluster" = var.cluster_name
    "rezus.cloud:role"    = local.spec[each.key].role
  }

  dynamic "network" {
    for_each = var.network_ids
    content {
      uuid = network.value
    }
  }

  lifecycle {
    # Later config changes reach the node through the Talos API, not by recreating it.
    ignore_changes = [user_data, image_id]

    precondition {
      condition     = local.spec[each.key].image != null
      error_message = "openstack: machine ${each.key} has no image: set providerSettings.openstack.default_image to the id of the Talos image (openstack-amd64.raw.xz uploaded with disk format raw)."
    }
    precondition {
      condition     = local.spec[each.key].size != null
      error_message = "openstack: machine ${each.key} has no flavor: set providerSettings.openstack.default_size to a flavor name."
    }
    precondition {
      condition     = local.user_data_b64_chars[each.key] <= local.user_data_limit
      error_message = "openstack: machine ${each.key}'s Talos config is ${local.user_data_b64_chars[each.key]} characters in base64; Nova accepts at most 65535. Shorten its patches."
    }
    precondition {
      condition     = !local.spec[each.key].fip || var.floating_ip_pool != null
      error_message = "openstack: machine ${each.key} asks for a floating IP: set providerSettings.openstack.floating_ip_pool to the external network's name."
    }
  }
}

# The instance reports only the port a network block named, so the port Nova created on the
# first network is looked up to attach the floating IP to.
data "openstack_networking_port_v2" "machine" {
  for_each = local.with_fip

  device_id  = openstack_compute_instance_v2.machine[each.key].id
  network_id = var.network_ids[0]
}

resource "openstack_networking_floatingip_v2" "machine" {
  for_each = local.with_fip

  pool        = var.floating_ip_pool
  description = "${var.cluster_name}-${each.key}"
}

resource "openstack_networking_floatingip_associate_v2" "machine" {
  for_each = local.with_fip

  floating_ip = openstack_networking_floatingip_v2.machine[each.key].address
  port_id     = data.openstack_networking_port_v2.machine[each.key].id
}

output "machines" {
  description = "name => { ipv4, ipv6 }"
  value = {
    for name, i in openstack_compute_instance_v2.machine : name => {
      ipv4 = contains(keys(openstack_networking_floatingip_associate_v2.machine), name) ? openstack_networking_floatingip_associate_v2.machine[name].floating_ip : (i.access_ip_v4 != "" ? i.access_ip_v4 : null)
      ipv6 = i.access_ip_v6 != "" ? trim(i.access_ip_v6, "[]") : null
    }
  }
}
